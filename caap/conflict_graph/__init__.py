"""Typed conflict graph: facets, typed bi-temporal edges, detection, clusters, persistence,
source reliability."""

from caap.conflict_graph._relations_learned import LearnedRelations
from caap.conflict_graph._relations_rules import RulesRelations
from caap.conflict_graph.extractor import Extraction, Extractor, OfflineExtractor
from caap.conflict_graph.graph import ConflictGraph, WriteResult
from caap.conflict_graph.postgres import PostgresGraphStore
from caap.conflict_graph.relations import (
    RELATIONS,
    Facets,
    MemoryView,
    PairVerdict,
    RelationLayer,
    RiskVerdict,
    get_relation_layer,
    register_relation_layer,
)
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
    "RELATIONS",
    "AnswerSpace",
    "ConflictGraph",
    "ConflictGraphStore",
    "DependencyMap",
    "Extraction",
    "Extractor",
    "Facets",
    "GraphConfig",
    "GraphStore",
    "LabelledCase",
    "LearnedRelations",
    "MemoryView",
    "OfflineExtractor",
    "PairVerdict",
    "Posterior",
    "PostgresGraphStore",
    "RelationLayer",
    "ReliabilityModel",
    "RiskVerdict",
    "RulesRelations",
    "StoredMemory",
    "Validity",
    "WriteResult",
    "dominant_type",
    "get_relation_layer",
    "open_store",
    "read_timeline",
    "register_relation_layer",
    "risk_tier",
]
