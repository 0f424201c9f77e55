"""Typed conflict graph: facets, typed bi-temporal edges, detection, clusters, persistence."""

from caap.conflict_graph.extractor import Extraction, Extractor, OfflineExtractor
from caap.conflict_graph.graph import ConflictGraph, WriteResult
from caap.conflict_graph.rules import GraphConfig, dominant_type, read_timeline, risk_tier
from caap.conflict_graph.store import GraphStore, StoredMemory

__all__ = [
    "ConflictGraph",
    "Extraction",
    "Extractor",
    "GraphConfig",
    "GraphStore",
    "OfflineExtractor",
    "StoredMemory",
    "WriteResult",
    "dominant_type",
    "read_timeline",
    "risk_tier",
]
