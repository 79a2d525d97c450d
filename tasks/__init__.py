"""Data: pure generators of a PRNG key, and loaders."""
from attndyn.tasks.batch import Batch as Batch
from attndyn.tasks.errors import ConfigError as ConfigError
from attndyn.tasks.topic import COMPILER_OPTIONS as TOPIC_COMPILER_OPTIONS
from attndyn.tasks.topic import TopicDataset as TopicDataset
from attndyn.tasks.topic import TopicTaskConfig as TopicTaskConfig
from attndyn.tasks.topic import make_topic_dataset as make_topic_dataset
from attndyn.tasks.sst import SSTData as SSTData
from attndyn.tasks.sst import Sentence as Sentence
from attndyn.tasks.sst import load_sst as load_sst
from attndyn.tasks.sst import read_trees as read_trees
from attndyn.tasks.sst import to_batch as to_batch
from attndyn.tasks.sst import word_class_counts as word_class_counts
from attndyn.tasks.markov_pairs import MarkovPairsConfig as MarkovPairsConfig
from attndyn.tasks.markov_pairs import MarkovPairsDataset as MarkovPairsDataset
from attndyn.tasks.markov_pairs import make_markov_pairs_dataset as make_markov_pairs_dataset
from attndyn.tasks.markov_pairs import pair_ids as pair_ids
from attndyn.tasks.conll2000 import load_conll2000 as load_conll2000

__all__ = ["Batch", "ConfigError", "TopicDataset", "TopicTaskConfig", "make_topic_dataset",
           "SSTData", "Sentence", "load_sst", "read_trees", "to_batch", "word_class_counts",
           "MarkovPairsConfig", "MarkovPairsDataset", "make_markov_pairs_dataset", "pair_ids",
           "load_conll2000"]
