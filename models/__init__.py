"""Models as pure ``init(key, cfg) -> params`` / ``apply(params, batch) -> outputs`` pairs."""
from models.attention import attend as attend
from models.attention import softmax_attention as softmax_attention
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
from models.objective import make_loss as make_loss
from models.cnn_attention import CNNAttentionConfig as CNNAttentionConfig
from models.cnn_attention import CNNOutput as CNNOutput
from models.cnn_attention import cnn_attention as cnn_attention
from models.transformer_tagger import TaggerConfig as TaggerConfig
