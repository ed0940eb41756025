"""Training to a time budget: the run measures its own speed, then fixes its number of steps to fill the budget.

    TimeBudget(deadline=start + 30 * 60, reserve_s=30, save_steps=100)   # a TrainerCallback

Machines differ in speed, even in float32, so a fixed step count wastes a fast machine's budget or overruns a slow
one's. As in the "cramming" line of work (a fixed compute budget, the schedule in fractions of it), the callback
times the steps of the first `probe` share of the budget (at least `min_steps` steps, the first `skip` left out as
warm-up), then sets `max_steps` to what the rest of the budget holds, in whole checkpoint intervals, and rebuilds
the learning-rate schedule for that many steps. A step's time drifts during a run (batches by tokens differ, the
machine is shared), so where the schedule does not depend on the number of steps (inverse square root, constant,
their warm-ups: the project's recipes), the count is measured again at every checkpoint interval and moved to end
the run by its deadline. The final number is logged and recorded by train.py: `--max_steps N` repeats the run
exactly, since the measuring steps lie inside the warm-up, and the schedules that get re-measured do not depend on N.
"""

import logging
import math
import time

import torch
from transformers import TrainerCallback
from transformers.optimization import get_scheduler

logger = logging.getLogger(__name__)

# Schedules whose learning rate at a step does not depend on the number of steps: the count may move during a run.
STEP_COUNT_FREE = {"inverse_sqrt", "constant", "constant_with_warmup"}


class TimeBudget(TrainerCallback):
    """Stops training at the step that ends the run by `deadline` (a time.monotonic() value).

    Args:
        deadline: when the run must be done, the model saved.
        reserve_s: seconds kept for what follows training (averaging, saving).
        save_steps: checkpoint interval: the step count is a multiple of it (whole intervals for averaging).
        min_checkpoints: at least this many intervals (the checkpoints to average).
        probe: share of the time left at the start spent measuring.
    """

    def __init__(
        self,
        deadline: float,
        reserve_s: float,
        save_steps: int | None = None,
        min_checkpoints: int = 1,
        probe: float = 0.05,
        min_steps: int = 20,
        skip: int = 3,
    ):
        self.deadline, self.reserve_s, self.interval = deadline, reserve_s, save_steps or 100
        self.min_checkpoints, self.probe, self.min_steps, self.skip = min_checkpoints, probe, min_steps, skip
        self.max_steps: int | None = None
        self.seconds_per_step: float | None = None
        self.progress = None  # Trainer's ProgressCallback, whose bar learns the step count when it is set

    def on_train_begin(self, args, state, control, **kwargs):
        self.begin = time.monotonic()
        self.probe_s = self.probe * (self.deadline - self.begin)
        self.first_step = state.global_step

    def on_step_end(self, args, state, control, optimizer=None, lr_scheduler=None, **kwargs):
        now = time.monotonic()
        if state.global_step == self.first_step + self.skip:
            self.marks = [(state.global_step, now)]  # (step, time) at the start of measuring, then every interval
        measured = state.global_step - self.first_step - self.skip
        if self.max_steps is None and measured >= self.min_steps and now - self.begin >= self.probe_s:
            self.set_steps(state, now, *self.marks[0])
            if optimizer is not None and lr_scheduler is not None:
                reschedule(args, optimizer, lr_scheduler, self.max_steps)
            logger.warning(
                "time budget: %.2f s a step over %d steps, so %d steps end the run by its deadline%s",
                self.seconds_per_step,
                measured,
                self.max_steps,
                " (measured again at every checkpoint)" if self.moves(args) else "",
            )
        elif self.max_steps is not None and state.global_step % self.interval == 0:
            self.marks = [*self.marks[-2:], (state.global_step, now)]
            if self.moves(args) and state.global_step < self.max_steps:
                self.set_steps(state, now, *self.marks[0])  # the rate of the last two intervals
        if self.max_steps is not None and state.global_step >= self.max_steps:
            control.should_training_stop = True

    def moves(self, args) -> bool:
        """Whether the step count may move after it is first set: the schedule does not depend on it."""
        return getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type) in STEP_COUNT_FREE

    def set_steps(self, state, now: float, since_step: int, since_time: float):
        """max_steps from the speed since (since_step, since_time), in whole intervals; never a step already run."""
        self.seconds_per_step = (now - since_time) / max(state.global_step - since_step, 1)
        steps = state.global_step + int((self.deadline - now - self.reserve_s) / self.seconds_per_step)
        intervals = max(steps // self.interval, self.min_checkpoints, state.global_step // self.interval + 1)
        self.max_steps = state.max_steps = intervals * self.interval
        bar = getattr(self.progress, "training_bar", None)
        if bar is not None:
            bar.total = self.max_steps
            bar.refresh()


def reschedule(args, optimizer, lr_scheduler, num_training_steps: int):
    """Give Trainer's LambdaLR scheduler the step functions of its schedule for `num_training_steps` steps, and set
    the learning rates of the current step accordingly (a new scheduler made on the optimizer would reset them)."""
    scratch = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    schedule = get_scheduler(
        args.lr_scheduler_type,
        scratch,
        num_warmup_steps=args.get_warmup_steps(num_training_steps),
        num_training_steps=num_training_steps,
        scheduler_specific_kwargs=args.lr_scheduler_kwargs,
    )
    lr_scheduler.lr_lambdas = schedule.lr_lambdas * len(optimizer.param_groups)  # one schedule for every group
    for group, base, factor in zip(optimizer.param_groups, lr_scheduler.base_lrs, lr_scheduler.lr_lambdas):
        group["lr"] = base * factor(lr_scheduler.last_epoch)


def provisional_max_steps(budget_s: float) -> int:
    """The step count Trainer starts with under a budget, before the run has measured itself: more than any machine
    runs in the budget (100 steps a second), so that only the budget ends the run."""
    return max(math.ceil(budget_s * 100), 1)


def time_budget(training_args, checkpoint, started: float) -> TimeBudget | None:
    """The budget callback of a run that has a budget and no --max_steps (which repeats a budgeted run exactly),
    counting from `started` (a time.monotonic() value); a resumed budgeted run keeps the step count it fixed."""
    from .checkpoints import trained_steps

    if training_args.time_budget_minutes and training_args.max_steps > 0:
        logger.info("--max_steps %d given: the time budget is not used", training_args.max_steps)
        training_args.time_budget_minutes = None
    if not training_args.time_budget_minutes:
        return None
    if checkpoint is not None and trained_steps(checkpoint)["max_steps"]:
        training_args.max_steps = trained_steps(checkpoint)["max_steps"]
        logger.warning(
            "resuming a run with a time budget: its %d steps, fixed before the kill", training_args.max_steps
        )
        return None
    deadline = started + 60 * training_args.time_budget_minutes
    training_args.max_steps = provisional_max_steps(deadline - time.monotonic())
    return TimeBudget(
        deadline,
        reserve_s=max(20.0, 0.02 * 60 * training_args.time_budget_minutes),
        save_steps=training_args.save_steps if training_args.save_strategy == "steps" else None,
        min_checkpoints=training_args.average_checkpoints or 1,
    )


__all__ = ["TimeBudget", "time_budget", "reschedule", "provisional_max_steps"]
