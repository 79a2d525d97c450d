"""Theory quantities, metrics and figures."""
from analysis.invariant import invariant as invariant
from analysis.invariant import invariant_drift as invariant_drift
from analysis.invariant import nontopic_context as nontopic_context
from analysis.observables import embedding_norms as embedding_norms
from analysis.observables import topic_observables as topic_observables
from analysis.sen import sen_norm as sen_norm
from analysis.sen import sen_relative_error as sen_relative_error
from analysis.closed_form import closed_form_updates as closed_form_updates
from analysis.closed_form import context_gradients as context_gradients
from analysis.deviation import deviation_curve as deviation_curve
from analysis.deviation import final_abs_deviation as final_abs_deviation
from analysis.deviation import max_abs_deviation as max_abs_deviation
from analysis.lemma1 import equivalent_keys as equivalent_keys
from analysis.summary import aggregate as aggregate
from analysis.summary import run_summaries as run_summaries
