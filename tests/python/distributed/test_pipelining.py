"""torch.distributed.pipelining on the "kolo" backend (issue 57): an MLP split into one stage per
rank of a group, trained a few SGD steps with ScheduleGPipe and Schedule1F1B (4 micro-batches),
ends with exactly the weights and losses the same training gets on gloo, run as a peer in the same
job. The stages exchange activations and gradients with isend/irecv batches
(batch_isend_irecv), and, where the stage infers its shapes from the first micro-batch, the
metadata with send_object_list / recv_object_list. Nothing is reduced: the arithmetic of every
stage is the same on both backends, so the comparison is bitwise. A local run of the whole model
checks that both pipelines computed the right thing (within float tolerance: the stages' autograd
accumulates the micro-batches' gradients in a different order than one module does)."""

import pytest
import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

RANK = dist.get_rank()
SIZE = dist.get_world_size()
WIDTH = 24
BLOCKS = 4  # split evenly over 2 or 4 stages
MICROBATCHES = 4
MICROBATCH = 3
STEPS = 3
SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}


def whole_model():
    torch.manual_seed(4321)
    layers = []
    for _ in range(BLOCKS):
        layers += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.Tanh()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(WIDTH, 5))


def stage_module(stage, stages, model=None):
    """Stage `stage` of `stages` of `model` (a new whole_model()): its share of the blocks (the
    last stage also the head)."""
    layers = list(whole_model() if model is None else model)
    per_stage = 2 * BLOCKS // stages
    end = (stage + 1) * per_stage if stage < stages - 1 else len(layers)
    return torch.nn.Sequential(*layers[stage * per_stage:end])


def batches(seed):
    """The same batches on every rank (the first stage reads the inputs, the last the targets)."""
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(MICROBATCHES * MICROBATCH, WIDTH, generator=g),
             torch.randint(0, 5, (MICROBATCHES * MICROBATCH,), generator=g))
            for _ in range(STEPS)]


def loss_fn(output, target):
    return torch.nn.functional.cross_entropy(output, target)


def train_pipeline(schedule_class, group, seed, static_shapes):
    """Trains this rank's stage of the pipeline over `group` (None: the default group, kolo);
    returns the stage's trained parameters and, on the last stage, every micro-batch's loss."""
    stage, stages = dist.get_rank(group), dist.get_world_size(group)
    module = stage_module(stage, stages)
    shapes = {}
    if static_shapes:  # else the stage infers them, exchanging metadata with its neighbours
        # Examples of one micro-batch; requires_grad says which way gradients go.
        with torch.no_grad():
            example = whole_model()[:2 * BLOCKS // stages * stage](torch.zeros(MICROBATCH, WIDTH))
        shapes = {"input_args": example.requires_grad_(stage > 0),
                  "output_args": module(example).detach().requires_grad_()}
    pipe_stage = PipelineStage(module, stage, stages, torch.device("cpu"), group=group, **shapes)
    schedule = schedule_class(pipe_stage, n_microbatches=MICROBATCHES, loss_fn=loss_fn)
    optimizer = torch.optim.SGD(module.parameters(), lr=0.2, momentum=0.9)
    losses = []
    for x, y in batches(seed):
        optimizer.zero_grad()
        step_losses = []
        if stage == 0:
            schedule.step(x)
        elif stage == stages - 1:
            schedule.step(target=y, losses=step_losses)
        else:
            schedule.step()
        losses += [loss.detach().clone() for loss in step_losses]
        optimizer.step()
    return {name: p.detach().clone() for name, p in module.named_parameters()}, losses


def train_locally(stage, stages, seed):
    """The same training on the whole model in this process: this stage's share of the result."""
    model = whole_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    losses = []
    for x, y in batches(seed):
        optimizer.zero_grad()
        for xs, ys in zip(x.chunk(MICROBATCHES), y.chunk(MICROBATCHES)):
            loss = loss_fn(model(xs), ys)
            loss.backward()
            losses.append(loss.detach())
        for p in model.parameters():
            p.grad /= MICROBATCHES  # what the schedules' scale_grads does
        optimizer.step()
    return dict(stage_module(stage, stages, model).named_parameters()), losses


def check(on_kolo, on_gloo, group):
    (kolo_weights, kolo_losses), (gloo_weights, gloo_losses) = on_kolo, on_gloo
    assert kolo_weights.keys() == gloo_weights.keys()
    for name in kolo_weights:
        assert torch.equal(kolo_weights[name], gloo_weights[name]), (
            "stage %d's %s differs from gloo's by up to %g" % (
                dist.get_rank(group), name,
                (kolo_weights[name] - gloo_weights[name]).abs().max().item()))
    assert len(kolo_losses) == len(gloo_losses)
    for a, b in zip(kolo_losses, gloo_losses):
        assert torch.equal(a, b), (a, b)


def check_against_local(trained, group, seed):
    stage, stages = dist.get_rank(group), dist.get_world_size(group)
    weights, losses = trained
    expected_weights, expected_losses = train_locally(stage, stages, seed)
    initial = dict(stage_module(stage, stages).named_parameters())
    for name, value in weights.items():
        assert not torch.equal(value, initial[name]), "%s did not train" % name
        torch.testing.assert_close(value, expected_weights[name].detach(), rtol=1e-5, atol=1e-6,
                                   msg=name)
    if stage == stages - 1:
        assert len(losses) == STEPS * MICROBATCHES
        torch.testing.assert_close(torch.stack(losses), torch.stack(expected_losses))
    else:
        assert losses == []


@pytest.mark.parametrize("static_shapes", [False, True], ids=["inferred", "static"])
@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
def test_a_pipeline_over_every_rank_trains_to_the_weights_of_gloo(schedule, static_shapes, gloo):
    seed = 10
    on_kolo = train_pipeline(SCHEDULES[schedule], None, seed, static_shapes)
    on_gloo = train_pipeline(SCHEDULES[schedule], gloo, seed, static_shapes)
    check(on_kolo, on_gloo, None)
    check_against_local(on_kolo, None, seed)


def test_pipelines_over_pairs_of_ranks_use_the_pairs_ranks():
    """Two-stage pipelines over groups of two ranks ({0, 1} and {2, 3} at 4 ranks): the
    stages' peers are group ranks, which the backend maps to the job's ranks; the pipelines
    train different data at once, without waiting on each other."""
    if SIZE % 2:
        pytest.skip("needs an even number of ranks")
    pairs = [[r, r + 1] for r in range(0, SIZE, 2)]
    on_kolo = [dist.new_group(ranks) for ranks in pairs]  # every rank makes every group
    on_gloo = [dist.new_group(ranks, backend="gloo") for ranks in pairs]
    pair = RANK // 2
    seed = 50 + pair
    trained = train_pipeline(Schedule1F1B, on_kolo[pair], seed, False)
    check(trained, train_pipeline(Schedule1F1B, on_gloo[pair], seed, False), on_kolo[pair])
    check_against_local(trained, on_kolo[pair], seed)
