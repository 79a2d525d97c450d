"""Theory quantities, metrics and figures."""
from analysis.invariant import invariant as invariant
from analysis.invariant import invariant_drift as invariant_drift
from analysis.invariant import nontopic_context as nontopic_context
from analysis.observables import embedding_norms as embedding_norms
from analysis.observables import topic_observables as topic_observables
from analysis.sen import sen_norm as sen_norm
from analysis.sen import sen_relative_error as sen_relative_error
