"""Time evolution: jit+scan training, vmapped sweeps, ODEs; one Trajectory type for all."""
from dynamics.optimizers import OPTIMIZERS as OPTIMIZERS
from dynamics.optimizers import base_optimizer as base_optimizer
from dynamics.optimizers import masked_optimizer as masked_optimizer
from dynamics.sweep import run_sweep as run_sweep
from dynamics.sweep import sweep_mesh as sweep_mesh
from dynamics.train import TrainConfig as TrainConfig
from dynamics.train import make_train as make_train
from dynamics.train import minibatch as minibatch
from dynamics.trajectory import Trajectory as Trajectory
from dynamics.gradient_flow import gradient_flow as gradient_flow
from dynamics.reduced_ode import reduced_sen_ode as reduced_sen_ode
from dynamics.early_stopping import EarlyStopped as EarlyStopped
from dynamics.early_stopping import make_train_early_stopping as make_train_early_stopping
