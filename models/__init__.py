"""Models as pure ``init(key, cfg) -> params`` / ``apply(params, batch) -> outputs`` pairs."""
from models.attention import attend as attend
from models.attention import softmax_attention as softmax_attention
from models.classifiers import LINEAR_CLASSIFIERS as LINEAR_CLASSIFIERS
from models.classifiers import apply_classifier as apply_classifier
from models.classifiers import init_classifier as init_classifier
from models.lu import PARAM_GROUPS as PARAM_GROUPS
from models.lu import LuModelConfig as LuModelConfig
from models.lu import LuOutput as LuOutput
from models.lu import Model as Model
from models.lu import lu_attention as lu_attention
from models.lu import word_scores as word_scores
from models.objective import accuracy as accuracy
from models.objective import cross_entropy as cross_entropy
from models.objective import LuCrossEntropy as LuCrossEntropy
from models.objective import make_loss as make_loss
from models.cnn import CNNAttentionConfig as CNNAttentionConfig
from models.cnn import CNNOutput as CNNOutput
from models.cnn import cnn_attention as cnn_attention
from models.transformer_tagger import TaggerConfig as TaggerConfig
from models.structured import crf_marginals as crf_marginals
from models.structured import fusedmax as fusedmax
from models.structured import sparsemap as sparsemap
from models.structured import sparsemap_solve as sparsemap_solve

from tasks.errors import ConfigError as ConfigError

__all__ = ["ConfigError", "attend", "softmax_attention", "LINEAR_CLASSIFIERS", "apply_classifier",
           "init_classifier", "PARAM_GROUPS", "LuModelConfig", "LuOutput", "Model", "lu_attention",
           "word_scores", "accuracy", "cross_entropy", "LuCrossEntropy", "make_loss",
           "CNNAttentionConfig", "CNNOutput", "cnn_attention", "TaggerConfig", "crf_marginals",
           "fusedmax", "sparsemap", "sparsemap_solve"]
