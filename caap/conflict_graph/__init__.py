"""Typed conflict graph: facets, typed bi-temporal edges, detection, clusters, persistence."""

from caap.conflict_graph.extractor import Extraction, Extractor, OfflineExtractor
from caap.conflict_graph.graph import ConflictGraph, WriteResult
from caap.conflict_graph.rules import GraphConfig, dominant_type, read_timeline, risk_tier
from caap.conflict_graph.stale import DEFAULT_DEPENDENCIES, DependencyMap, Validity
from caap.conflict_graph.store import GraphStore, StoredMemory

__all__ = [
    "DEFAULT_DEPENDENCIES",
    "ConflictGraph",
    "DependencyMap",
    "Extraction",
    "Extractor",
    "GraphConfig",
    "GraphStore",
    "OfflineExtractor",
    "StoredMemory",
    "Validity",
    "WriteResult",
    "dominant_type",
    "read_timeline",
    "risk_tier",
]
