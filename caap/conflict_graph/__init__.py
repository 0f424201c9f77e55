"""Typed conflict graph: facets, typed bi-temporal edges, detection, clusters, persistence,
source reliability."""

from caap.conflict_graph.extractor import Extraction, Extractor, OfflineExtractor
from caap.conflict_graph.graph import ConflictGraph, WriteResult
from caap.conflict_graph.postgres import PostgresGraphStore
from caap.conflict_graph.reliability import (
    AnswerSpace,
    LabelledCase,
    Posterior,
    ReliabilityModel,
)
from caap.conflict_graph.rules import GraphConfig, dominant_type, read_timeline, risk_tier
from caap.conflict_graph.stale import DEFAULT_DEPENDENCIES, DependencyMap, Validity
from caap.conflict_graph.store import ConflictGraphStore, GraphStore, StoredMemory, open_store

__all__ = [
    "DEFAULT_DEPENDENCIES",
    "AnswerSpace",
    "ConflictGraph",
    "ConflictGraphStore",
    "DependencyMap",
    "Extraction",
    "Extractor",
    "GraphConfig",
    "GraphStore",
    "LabelledCase",
    "OfflineExtractor",
    "Posterior",
    "PostgresGraphStore",
    "ReliabilityModel",
    "StoredMemory",
    "Validity",
    "WriteResult",
    "dominant_type",
    "open_store",
    "read_timeline",
    "risk_tier",
]
