"""The ``dataset`` section as a checked-in class (``sylvie.config_sections`` says how it is kept equal to the
schema). Which source reads each knob is the schema's ``sources``; a synthetic preset's knobs are its ``x-presets``,
which ``sylvie.config.section`` puts in place of these defaults."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from sylvie.config_sections import knob


@dataclass(frozen=True)
class DatasetConfig:
    """The options of one dataset (a key of ``datasets``): its source and that source's knobs."""

    source: Literal["planetoid", "ogb", "synthetic", "files", "dgl"] | None = knob(
        None,  # no default in the schema: inferred from the dataset's name
        "loader family (inferred for cora, citeseer, pubmed, ogbn-*, synthetic*). files: your own graph as Parquet, "
        "Arrow/Feather, CSV/TSV (optionally gzip) or .npy files (edges, node_table and the knobs after them); dgl: "
        "a dgl.save_graphs file (graph_file)")
    name: str | None = knob(
        None,
        "planetoid, ogb: the dataset to read, by its published name (cora, ogbn-arxiv, ogbl-collab, ...); null: its "
        "key under datasets. One dataset under two keys, e.g. Cora for node classification and Cora with an "
        "edge_split for link prediction")
    edges: str | None = knob(
        None,
        "files: the edge list: a file or a folder of files of one kind: .parquet/.pq, .arrow/.feather/.ipc, "
        ".csv/.tsv (optionally .gz), or .npy (integers, shape (M, 2) or OGB's (2, M))")
    edge_columns: list[str] = knob(["src", "dst"], "files: the edge list's source and destination columns")
    directed: bool = knob(
        False,
        "files, dgl: false: an edge joins its two nodes both ways (symmetrised as the OGB loader does: both "
        "directions, duplicates and self-loops dropped); true: edges go src -> dst as given (duplicates and "
        "self-loops dropped)")
    node_tables: dict[str, str | dict[str, Any]] | None = knob(
        None,
        "files, a typed graph: a node table per node type, instead of node_table: type: its file or folder (of the "
        "formats node_table takes), or type: {path, node_key, feature_columns} where its columns are named its own "
        "way (each key left out takes the dataset's knob of that name; feature_columns [] for a type without "
        "features). label_column and the split read each; a type whose feature columns match none of its table's "
        "has no features, and the models learn an embedding for it (a warning says so, unless its feature_columns "
        "is []); only the target type's table may carry labels and the split")
    relations: list[dict[str, Any]] | None = knob(
        None,
        "files, a typed graph: its relations, each {src: node type, name, dst: node type, edges: its edge list (a "
        "file or folder), edge_columns: its source and destination columns (default: the dataset's edge_columns), "
        "directed (default true)}. directed true: edges go src -> dst as given, and reverse_relations adds the "
        "relation's reverse (rev-<name>) with weights of its own; false, for a relation within one node type whose "
        "pairs' order means nothing (a citation list holding each pair once): both directions in the one relation, "
        "duplicates and self-loops dropped, and no reverse added")
    target: str | None = knob(
        None,
        "files, a typed graph: the node type whose nodes carry the labels and split, and are predicted")
    node_table: str | None = knob(
        None,
        "files: the node table (a row a node): a file or a folder of files of one kind: .parquet/.pq, "
        ".arrow/.feather/.ipc, .csv/.tsv (optionally .gz)")
    node_key: str | None = knob(
        None,
        "files: the node table's column of node ids (integers or strings, each once), which the edges name; they "
        "are numbered 0..N-1 in the table's order and the mapping written beside the canonical graph "
        "(node_keys.arrow). null: the edges give row numbers of the node table")
    feature_columns: list[str] = knob(
        ["feat"],
        "files, dgl: the features: one list column (files) or node-data name (dgl), or several numeric columns, a "
        "dimension each, named or matched by a glob (\"f*\": the matching columns in the table's order)")
    features_file: str | None = knob(
        None,
        "files: an .npy matrix N x D (float16, float32 or float64) of the features, rows in the node table's order, "
        "instead of feature_columns")
    label_column: str = knob(
        "label",
        "files, dgl: the label of each node: integers from 0 (null or empty: unlabelled) or strings (classes "
        "numbered in sorted order, the names in meta.json's class_names)")
    split_column: str | None = knob(
        None,
        "files: a column giving each node's split: train, val (or valid, validation), test, empty or null for none; "
        "or 0, 1, 2 (-1 for none)")
    mask_columns: list[str] | None = knob(
        None,
        "files, dgl: three boolean columns (dgl: node-data names), train, val and test. Neither this nor "
        "split_column: the labelled nodes are split at random (train_fraction, val_fraction, the rest test; seed). "
        "dgl: null reads train_mask, val_mask and test_mask where the graph has all three")
    unknown_nodes: Literal["error", "add"] = knob(
        "error",
        "files: a node named in the edges but absent from the node table: error names the file and row; add makes "
        "it a node of its own after the table's, with zero features and no label")
    graph_file: str | None = knob(
        None,
        "dgl: a file written by dgl.save_graphs (its first graph), read with DGL in the download stage only")
    raw_dir: str = knob("data/raw/planetoid", "planetoid: folder with the ind.<name>.* files")
    allow_download: bool = knob(True, "planetoid: download missing raw files (from data.dgl.ai, where DGL keeps them)")
    root: str = knob("data/raw/ogb", "ogb: folder the OGB archive is downloaded and extracted into")
    timeout: float = knob(
        60,
        "planetoid, ogb: seconds a download waits for the server to answer (connect, or any read) before it fails",
        exclusive_minimum=0, resumable=True)
    mirror: str | None = knob(None, "ogb: base URL of a mirror holding <name>.zip (null = OGB's own server)")
    preset: Literal["none", "products", "mag", "igbh", "citation2"] = knob(
        "none",
        "synthetic: a graph shaped like a real one, its knobs standing in for the defaults below (a knob set "
        "explicitly wins, e.g. nodes for a smaller graph of the same shape). products: ogbn-products' size, "
        "degrees, homophily, split and accuracy (nested communities, log-normal degrees, split by score; the values "
        "under x-presets here; validated against the published statistics in benchmarks/README.md). mag: a typed "
        "citation graph shaped like ogbn-mag (papers, authors, institutions, fields of study; structure mag). igbh: "
        "a typed citation graph shaped like IGBH-small, MLPerf's GNN dataset (paper, author, institute, fos, 1024 "
        "features on every type, 19 classes; structure igbh). citation2: a directed citation graph shaped like "
        "ogbl-citation2 for link prediction (papers cite older papers only, each newest evaluated paper's two latest "
        "references held out, 1,000 negatives each; structure citation)")
    nodes: int = knob(10000, "synthetic: number of nodes", minimum=2, maximum=2147483647)
    avg_degree: float = knob(10.0, "synthetic: average (undirected) degree", exclusive_minimum=0)
    features: int = knob(32, "synthetic: feature dimension", minimum=1, maximum=2147483647)
    classes: int = knob(8, "synthetic: number of classes (= blocks)", minimum=1, maximum=2147483647)
    homophily: float = knob(0.8, "synthetic: probability an edge stays inside its block", minimum=0, maximum=1)
    feature_noise: float = knob(
        4.0,
        "synthetic: std of the Gaussian noise around class centroids (centroids have std 1; features are then "
        "scaled to unit variance)",
        minimum=0)
    label_noise: float = knob(
        0.3,
        "synthetic: share of atypical nodes, whose label is drawn uniformly instead of being their block (features "
        "follow the label, edges the block); it bounds the accuracy a model can reach (docs/datasets.md)",
        minimum=0, maximum=1)
    train_fraction: float = knob(
        0.6,
        "synthetic: fraction of nodes for training; files, dgl without a split: of the labelled nodes",
        minimum=0, maximum=1)
    val_fraction: float = knob(
        0.2,
        "synthetic: fraction of nodes for validation; files, dgl without a split: of the labelled nodes",
        minimum=0, maximum=1)
    seed: int = knob(
        0,
        "synthetic: generator seed; files, dgl: the random split's; planetoid, synthetic, files, dgl with "
        "edge_split: the edge split's and its negatives' (0 to 2^32-1, as every seed)",
        minimum=0, maximum=4294967295)
    edge_split: list[float] | None = knob(
        None,
        "link prediction: hold out these shares [val, test] of the edges at random (seed; an undirected edge as "
        "one, both directions held out), to be predicted; the rest train and carry the messages; null: no edge "
        "split drawn (files: edge_split_column, or val_edges and test_edges, give one; ogbl-*: OGB's own)")
    edge_split_relation: str | None = knob(
        None,
        "typed graphs with edge_split: the relation whose edges are split and predicted, by name (e.g. cites) or "
        "src:name:dst where names repeat; its held-out edges leave it and its reverse (rev-<name>), the other "
        "relations only pass messages. Required on a typed graph with edge_split, refused on a graph of one node type")
    edge_split_column: str | None = knob(
        None,
        "files, link prediction: the edge list's column giving each edge's split: train, val (or valid, "
        "validation), test; or 0, 1, 2")
    val_edges: str | None = knob(
        None,
        "files, link prediction: the validation pairs (a file or folder, edge_columns naming the columns), edges "
        "then holding the training edges; with test_edges")
    test_edges: str | None = knob(
        None,
        "files, link prediction: the test pairs (a file or folder, edge_columns naming the columns); with val_edges")
    negatives_column: str | None = knob(
        None,
        "files, link prediction: a list column of the validation and test pairs giving each pair's negative "
        "destinations (as OGB stores ogbl-citation2's), every list of one length; null: eval_negatives drawn once")
    eval_negatives: int = knob(
        100,
        "link prediction: negative destinations drawn once (seed) for each validation and test pair where none are "
        "given, none an edge of any split nor the pair itself, written beside the canonical graph so that every run "
        "ranks against the same ones",
        minimum=1, maximum=2147483647)
    leaked_edges: Literal["error", "keep"] = knob(
        "error",
        "files, link prediction: a validation or test pair that is also a training edge (a leak: message passing "
        "would see it). error: refused, naming the first; keep: kept, with a warning giving the count")
    structure: Literal["blocks", "nested", "mag", "igbh", "citation"] = knob(
        "blocks",
        "synthetic: blocks: a degree-corrected stochastic block model, one block per class and no locality within a "
        "block (sylvie/data/synthetic.py); nested: communities nested at several scales inside each class, so that "
        "a few hops stay mostly in a node's communities, as in real graphs (sylvie/data/nested_communities.py); "
        "mag: a typed graph in ogbn-mag's proportions, nodes its total, each relation's degree ogbn-mag's "
        "(avg_degree unused), homophily the share of edges within a paper's venue (sylvie/data/mag_like.py); igbh: "
        "a typed graph in IGBH-small's proportions, nodes its total, each relation's degree IGBH-small's, features "
        "on every type, homophily (or relation_homophily) the expected share of a relation's edges joining two "
        "nodes of one class (sylvie/data/igbh_like.py); citation: a link-prediction graph of papers citing older "
        "papers (sylvie/data/citation_like.py): avg_degree twice the references per paper, classes the latent topics "
        "that drive features and citations, homophily the probability that a reference is drawn within the citing "
        "paper's topic, degree_sigma the spread of how often papers are cited, val_fraction the share of papers (the "
        "newest with 3 or more references) whose latest reference is held out for test and next latest for "
        "validation, eval_negatives their fixed negatives; messages pass both ways over the other citations, and "
        "nodes have no labels")
    reverse_relations: bool = knob(
        True,
        "typed graphs (structure mag or igbh, ogbn-mag, files with relations): add each relation's reverse "
        "(rev-<name>, destination to source), as R-GCN and R-GAT recipes do, so that every node type receives "
        "messages")
    relation_homophily: dict[str, float] = knob(
        {},
        "synthetic, structure mag or igbh: the homophily of each relation by name (e.g. {cites: 0.75}), a relation "
        "not named taking homophily; the igbh preset names all four (give {} for homophily on every relation)")
    community_size: int = knob(
        64,
        "synthetic, structure nested: mean nodes of a smallest community (a leaf)",
        minimum=2, maximum=2147483647)
    branching: int = knob(
        8,
        "synthetic, structure nested: communities of one level grouped into one of the next, up to the class "
        "communities",
        minimum=2, maximum=2147483647)
    locality: float = knob(
        0.7,
        "synthetic, structure nested: probability that an edge inside its class community stays in the source's "
        "leaf, else in its next-larger community with this probability, and so on up",
        minimum=0, maximum=1)
    split: Literal["random", "score"] = knob(
        "random",
        "synthetic, structure nested: random: a random train_fraction trains, val_fraction validates; score: by a "
        "node score as ogbn-products' split is by sales rank (the top train_fraction train, the next val_fraction "
        "validate), the score being the node's degree propensity times log-normal noise")
    degrees: Literal["pareto", "lognormal"] = knob(
        "pareto",
        "synthetic, structure nested: the distribution of the nodes' degree propensities (an edge picks its ends by "
        "propensity). pareto: shape 2.5 from 1, as the block model's (no node below two thirds of the mean degree); "
        "lognormal: log-std degree_sigma, both tails (many nodes of a few edges and hubs of thousands, as "
        "ogbn-products)")
    degree_sigma: float = knob(
        1.0,
        "synthetic, structure mag or igbh, and structure nested with degrees lognormal: the standard deviation of "
        "the log propensity (larger: more spread degrees)",
        minimum=0)
    atypical: Literal["nodes", "communities"] = knob(
        "nodes",
        "synthetic, structure nested: what label_noise relabels. nodes: single nodes, their features following the "
        "new label (as the block model); communities: whole leaf communities, their features and edges staying "
        "their class community's, so that neither predicts the label while edges inside the leaf still join equal "
        "labels (high edge homophily and a bounded accuracy together, as ogbn-products)")
