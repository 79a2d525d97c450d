"""Data: pure generators of a PRNG key, and loaders."""
from tasks.batch import Batch as Batch
from tasks.errors import ConfigError as ConfigError
from tasks.topic import TopicDataset as TopicDataset
from tasks.topic import TopicTaskConfig as TopicTaskConfig
from tasks.topic import make_topic_dataset as make_topic_dataset
