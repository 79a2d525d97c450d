"""Models as pure ``init(key, cfg) -> params`` / ``apply(params, batch) -> outputs`` pairs."""
from attndyn.models.attention import attend as attend
from attndyn.models.attention import softmax_attention as softmax_attention
from attndyn.models.classifiers import LINEAR_CLASSIFIERS as LINEAR_CLASSIFIERS
from attndyn.models.classifiers import apply_classifier as apply_classifier
from attndyn.models.classifiers import init_classifier as init_classifier
from attndyn.models.lu import PARAM_GROUPS as PARAM_GROUPS
from attndyn.models.lu import LuModelConfig as LuModelConfig
from attndyn.models.lu import LuOutput as LuOutput
from attndyn.models.lu import Model as Model
from attndyn.models.lu import lu_attention as lu_attention
from attndyn.models.lu import word_scores as word_scores
from attndyn.models.objective import accuracy as accuracy
from attndyn.models.objective import cross_entropy as cross_entropy
from attndyn.models.objective import LuCrossEntropy as LuCrossEntropy
from attndyn.models.objective import make_loss as make_loss
from attndyn.models.cnn import CNNAttentionConfig as CNNAttentionConfig
from attndyn.models.cnn import CNNOutput as CNNOutput
from attndyn.models.cnn import cnn_attention as cnn_attention
from attndyn.models.transformer_tagger import TaggerConfig as TaggerConfig
from attndyn.models.structured import crf_marginals as crf_marginals
from attndyn.models.structured import fusedmax as fusedmax
from attndyn.models.structured import sparsemap as sparsemap
from attndyn.models.structured import sparsemap_solve as sparsemap_solve

from attndyn.tasks.errors import ConfigError as ConfigError

__all__ = ["ConfigError", "attend", "softmax_attention", "LINEAR_CLASSIFIERS", "apply_classifier",
           "init_classifier", "PARAM_GROUPS", "LuModelConfig", "LuOutput", "Model", "lu_attention",
           "word_scores", "accuracy", "cross_entropy", "LuCrossEntropy", "make_loss",
           "CNNAttentionConfig", "CNNOutput", "cnn_attention", "TaggerConfig", "crf_marginals",
           "fusedmax", "sparsemap", "sparsemap_solve"]
