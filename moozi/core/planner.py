"""The planner (thesis 5.2.5): a batched tree search over a pluggable model, wrapping mctx.

    a_t, v*_t, p*_t = P(root input)

The search itself is mctx's; this module only decides *what* it searches over
(`SearchModel`), how the dummy action behaves (`with_absorbing_dummy`, thesis
5.2.4) and which mctx policy runs (`SearchPolicy`). Everything is a pure,
batched function of (params, rng, inputs); callers `jax.jit` the program they
build around it (acting, reanalyze).

Sign convention (docs/envs.md): values are from the point of view of the player to
move and each reward is the reward of the player who just acted, so two-player
zero-sum games search with discount -gamma and mctx's backup
Q(s, a) = r + discount * v(s') needs no other special case.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from typing import Any, Callable, Literal, NamedTuple

import jax
import jax.numpy as jnp
import mctx

from moozi.envs.base import DUMMY_ACTION, EnvSpec
from moozi.errors import MooziError
from moozi.core.types import Array

Params = Any


class SearchPolicy(enum.Enum):
    """Which mctx policy runs the search."""

    MUZERO = "muzero"  # PUCT + root Dirichlet noise, act by visit counts^(1/temperature)
    GUMBEL_MUZERO = "gumbel_muzero"  # Gumbel top-k + sequential halving at the root


PASS_RULES = ("search", "after_opponent_if_ahead", "no_eye_fill")  # planner.play_pass_rule (moozi/play/pass_rule.py)
POLICY_TARGETS = ("visits", "completed_q")  # planner.policy_target
CHANCE_SEARCHES = ("sampled", "exact")  # planner.chance_search
AFTERSTATE_VALUES = ("expected", "parent")  # planner.afterstate_value


@dataclasses.dataclass(frozen=True)
class PlannerConfig:
    """Search settings (thesis 3.7, 5.2.5; Gumbel MuZero for the alternative)."""

    search_policy: SearchPolicy = SearchPolicy.MUZERO
    """The mctx policy: `SearchPolicy.MUZERO` or `SearchPolicy.GUMBEL_MUZERO` (or their values as strings)."""
    num_simulations: int = 50
    """Simulations per search; each expands one node (one recurrent inference)."""
    play_simulations: int | None = None
    """Simulations of the agent's search when it plays after training: `load_agent` (and so
    `moozi eval`, `play`, `gtp` and `--positions`), unless `load_agent(run, simulations=N)` or
    `--simulations N` asks for another count. None: `num_simulations`. Search at play time is
    worth a lot (OpenSpiel's MCTS keeps the solver's result on 0.785 of the labelled Connect Four
    positions with 100 rollouts and 0.868 with 1,000), and it costs nothing during training. The
    training workers and the in-training test search with `num_simulations`: the test only
    compares checkpoints of one run, and it shares the cores with training while it plays."""
    play_pass_rule: Literal["search", "after_opponent_if_ahead", "no_eye_fill"] = "search"
    """Go only, at play time (`load_agent` and everything built on it, as `play_simulations`):
    "search" lets the search pass whenever it likes; "after_opponent_if_ahead" never passes first
    and, once the opponent has passed, passes exactly when the area count wins; "no_eye_fill" does the
    same, never fills its own single-point eyes and passes when no other stone is left
    (moozi/play/pass_rule.py). Training and the in-training test are unchanged."""
    full_search_share: float = 1.0
    """Playout cap randomisation (Wu 2019, KataGo): the share of self-play moves searched with
    `num_simulations` and kept as policy targets; the other moves are searched with `fast_simulations`
    only to move the game on, and store no policy target (their p* is all zeros, which the policy
    loss weighs 0), while their positions keep their value (and ownership) targets. More games for
    the same search cost, so more value targets per hour. Drawn per self-play step for the whole batch of
    envs (KataGo draws per move). 1.0 (the default): every move gets the full search. Training
    self-play only: the in-training test, evaluation and play always search in full."""
    fast_simulations: int = 8
    """Simulations of the fast searches of playout cap randomisation (`full_search_share` < 1); never
    more than `num_simulations` (a run with fewer full simulations searches every move with those)."""
    score_utility: float = 0.0
    """AlphaZero mode on a territory game whose network learns the score (go9, `loss.score_coef` > 0):
    the search's utility adds `score_utility` * (2/pi) * atan(margin / `score_utility_scale`) to the
    win value, KataGo's static score utility (Wu 2019): the score head's margin at each leaf, the
    game's final Tromp-Taylor margin where a game ends in the search. Between two moves that both win
    (or both lose), the search then prefers the larger (or smaller) margin, where the win value alone
    sees no difference. 0 (the default): the win value alone. Training's value target stays the win."""
    score_utility_scale: float = 10.0
    """Points of margin at which the score utility reaches half its size (atan(1) = pi/4)."""
    pb_c_init: float = 1.25
    """PUCT constant c1 (MuZero only)."""
    pb_c_base: float = 19652.0
    """PUCT constant c2 (MuZero only)."""
    dirichlet_fraction: float = 0.25
    """Weight of the Dirichlet noise mixed into the root prior (MuZero only; 0 disables it)."""
    dirichlet_alpha: float = 0.3
    """Concentration of the root Dirichlet noise (MuZero only)."""
    temperature: float = 1.0
    """MuZero only: the acted action is sampled from visit_counts^(1/temperature); 0 acts greedily
    (argmax of the visit counts), as testing workers and evaluation do. Gumbel MuZero ignores it:
    its acted action is the search's selected action, whose exploration comes from `gumbel_scale`."""
    max_num_considered_actions: int = 16
    """Gumbel MuZero only: actions sampled (without replacement) for sequential halving at the root."""
    gumbel_scale: float = 1.0
    """Gumbel MuZero only: scale of the root Gumbel noise; 0 makes the search deterministic (evaluation)."""
    discount: float = 0.997
    """gamma per env step, e.g. 0.997 for Atari-like games and 1.0 for board games. The sign for
    two-player games is not part of it: `search_discount` multiplies it by `EnvSpec.discount_sign`."""
    policy_target: Literal["visits", "completed_q"] = "visits"
    """MuZero's PUCT search only: the policy target p*_t it gives training. "visits": the root's
    visit distribution (MuZero). "completed_q": Gumbel MuZero's improved policy
    softmax(prior logits + σ(completed Q)) (Danihelka et al., 2022), read from the same tree, with
    the root's prior logits before their Dirichlet noise (mctx's completion still weighs the visited
    moves' Q by the tree's noisy prior for the value it gives unvisited ones). With few simulations per legal move the visits
    mostly repeat the prior, so a prior that starts wrong stays wrong; the completed Q-values move
    it towards the moves the search values. In training the acted action is still drawn from the
    visits; a greedy agent (temperature 0: evaluation, play) takes the argmax of this improved policy,
    as Gumbel MuZero takes its best completed-Q move, not the most visited move, which with few
    simulations is mostly the prior's choice. Gumbel MuZero's target is always its completed-Q policy."""
    chance_search: Literal["sampled", "exact"] = "sampled"
    """AlphaZero mode (agent=alphazero) only: how its search over the game's rules meets chance inside
    a step. "sampled": the env's step draws one outcome where an edge is expanded, and the search
    plans as if that draw were certain. "exact": the step is split into its afterstate and its chance
    outcome (moozi/envs/afterstates.py) and the outcomes are expanded as chance nodes weighted by
    their true probabilities (moozi/core/alphazero_chance.py; mctx's Stochastic MuZero search, PUCT
    only), for games whose bridge gives that split (pgx:2048; docs/stochastic.md)."""
    afterstate_value: Literal["expected", "parent"] = "expected"
    """With `chance_search="exact"`: the value a chance node starts from, which mctx keeps in its mean.
    "expected": one expectimax step over the network's values of every outcome, weighted by their
    probabilities (C network calls per expansion, 32 for 2048). "parent": the network's value of the
    state the move is made from (no extra call; every move starts equal)."""
    min_value_range: float = 1e-8
    """Gumbel MuZero and `policy_target="completed_q"`, in value units: the smallest spread of a node's completed Q-values that
    the min-max rescaling to [0, 1] divides by (mctx's `epsilon`). With mctx's default (1e-8) any
    difference, however small next to the game's rewards, is stretched to the whole [0, 1] range
    and becomes a ~5-logit bonus in the policy target and the acted action, so noise in the learned
    values sharpens the prior step after step. A floor keeps differences smaller than it
    proportionally small. No preset sets it: a floor of one reward unit made MinAtar Freeway stop
    learning to cross and did not slow the collapse on Asterix (docs/training.md, "What limits
    Asterix, Seaquest and Freeway")."""

    def __post_init__(self):
        # Config files give the enum by its value ("gumbel_muzero"); accept that and keep the enum.
        try:
            object.__setattr__(self, "search_policy", SearchPolicy(self.search_policy))
        except ValueError:
            allowed = ", ".join(p.value for p in SearchPolicy)
            raise MooziError(f"planner.search_policy={self.search_policy!r}; allowed: {allowed}") from None
        if self.num_simulations < 1:
            raise MooziError(f"planner.num_simulations must be >= 1, got {self.num_simulations}")
        if self.play_pass_rule not in PASS_RULES:
            raise MooziError(f"planner.play_pass_rule={self.play_pass_rule!r}; allowed: {', '.join(PASS_RULES)}")
        if not 0.0 < self.full_search_share <= 1.0:
            raise MooziError(f"planner.full_search_share must lie in (0, 1] (1: every move searched in full), got {self.full_search_share}")
        if self.fast_simulations < 1:
            raise MooziError(f"planner.fast_simulations must be >= 1, got {self.fast_simulations}")
        if self.play_simulations is not None and self.play_simulations < 1:
            raise MooziError(f"planner.play_simulations must be >= 1 (or unset: num_simulations), got {self.play_simulations}")
        if not 0.0 <= self.dirichlet_fraction <= 1.0:
            raise MooziError(f"planner.dirichlet_fraction must be in [0, 1], got {self.dirichlet_fraction}")
        if self.dirichlet_alpha <= 0.0:
            raise MooziError(f"planner.dirichlet_alpha must be > 0, got {self.dirichlet_alpha}")
        if self.temperature < 0.0:
            raise MooziError(f"planner.temperature must be >= 0, got {self.temperature}")
        if self.max_num_considered_actions < 1:
            raise MooziError(
                f"planner.max_num_considered_actions must be >= 1, got {self.max_num_considered_actions}"
            )
        if self.gumbel_scale < 0.0:
            raise MooziError(f"planner.gumbel_scale must be >= 0, got {self.gumbel_scale}")
        if self.score_utility < 0.0:
            raise MooziError(f"planner.score_utility must be >= 0 (0: off), got {self.score_utility}")
        if self.score_utility_scale <= 0.0:
            raise MooziError(f"planner.score_utility_scale must be > 0 (points), got {self.score_utility_scale}")
        if not 0.0 <= self.discount <= 1.0:
            raise MooziError(f"planner.discount must be in [0, 1], got {self.discount}")
        if self.policy_target not in POLICY_TARGETS:
            raise MooziError(f"planner.policy_target={self.policy_target!r}; allowed: {', '.join(POLICY_TARGETS)}")
        if self.chance_search not in CHANCE_SEARCHES:
            raise MooziError(f"planner.chance_search={self.chance_search!r}; allowed: {', '.join(CHANCE_SEARCHES)}")
        if self.afterstate_value not in AFTERSTATE_VALUES:
            raise MooziError(f"planner.afterstate_value={self.afterstate_value!r}; allowed: {', '.join(AFTERSTATE_VALUES)}")
        if not self.min_value_range > 0.0:
            raise MooziError(f"planner.min_value_range must be > 0, got {self.min_value_range}")


def search_discount(config: PlannerConfig, spec: EnvSpec) -> float:
    """The per-edge discount the search backs values up with: gamma, negated for two-player games."""
    return float(config.discount) * spec.discount_sign


# --------------------------------------------------------------------------- models


RootFn = Callable[[Params, Array, Any], mctx.RootFnOutput]  # (params, rng, root_input) -> [B] root
RecurrentFn = Callable[[Params, Array, Array, Any], tuple[mctx.RecurrentFnOutput, Any]]


@dataclasses.dataclass(frozen=True)
class SearchModel:
    """The model behind the search: two pure, batched functions in mctx's own types.

    `root(params, rng, root_input) -> mctx.RootFnOutput` turns whatever the
    caller searches from (a stacked history for MuZero, an env state for
    AlphaZero) into root priors [B, A], value [B] and an embedding [B, ...].
    `recurrent(params, rng, action [B], embedding) -> (mctx.RecurrentFnOutput, embedding)`
    expands one edge; its `discount` [B] already carries gamma and the
    two-player sign (and 0 past a known terminal state, where a model knows it).

    The planner only calls these two functions, so a new kind of model (an
    AlphaZero one whose embedding is a pgx state and whose recurrent step is the
    env step plus the network's prediction) is a new `SearchModel`, not a change
    to the planner.
    """

    root: RootFn
    recurrent: RecurrentFn


class AbsorbingEmbedding(NamedTuple):
    """A model's embedding plus whether the node lies under a dummy-action edge."""

    inner: Any  # [B, ...] the wrapped model's embedding
    absorbing: Array  # [B] bool


def mask_interior_dummy(logits: Array) -> Array:
    """[B, A] prior logits of interior nodes: the dummy action keeps its logit only where the model
    puts half its prior on it (it predicts the end of the game), else it is masked."""
    predicts_end = jax.nn.softmax(logits, axis=-1)[:, DUMMY_ACTION] >= 0.5  # [B]
    dummy_logit = jnp.where(predicts_end, logits[:, DUMMY_ACTION], jnp.finfo(logits.dtype).min)
    return logits.at[:, DUMMY_ACTION].set(dummy_logit)


def with_absorbing_dummy(model: SearchModel) -> SearchModel:
    """Makes the dummy action absorbing (thesis 5.2.4): its subtree has zero rewards and values.

    A learned model cannot tell when the game has ended, so the agent learns to
    take the dummy action past the end; once taken, every edge below it has
    reward 0 and every node value 0, so the subtree backs up exactly 0 and
    cannot leak untrained value estimates into the root.

    Prior below an absorbing node: uniform. Every Q there is 0, so the prior
    only spreads visits within the subtree; uniform keeps the network's (never
    trained) policy on post-terminal states out of it. The wrapped model still
    runs on absorbing rows (the batch runs in lockstep, skipping would not save
    anything) and its outputs are masked with `where`.

    Above the end, the dummy is masked at interior nodes (mctx masks only the
    root) unless the model itself predicts the game has ended there, i.e. puts
    at least half its prior on the dummy: the policy target at a final step is
    one-hot on the dummy, so that is what the model learns at terminal states.
    Without the mask a side that is losing inside the tree "escapes" to the
    dummy's exact 0 (7.4% of interior visits in a Connect Four run went there),
    and the backed-up values of losing lines are too kind.
    """

    def root(params, rng, root_input):
        out = model.root(params, rng, root_input)
        absorbing = jnp.zeros(jnp.shape(out.value), bool)  # [B]
        return out.replace(embedding=AbsorbingEmbedding(out.embedding, absorbing))

    def recurrent(params, rng, action, embedding: AbsorbingEmbedding):
        out, inner = model.recurrent(params, rng, action, embedding.inner)
        absorbing = embedding.absorbing | (action == DUMMY_ACTION)  # [B]
        logits = mask_interior_dummy(out.prior_logits)
        out = out.replace(
            reward=jnp.where(absorbing, 0.0, out.reward).astype(out.reward.dtype),
            value=jnp.where(absorbing, 0.0, out.value).astype(out.value.dtype),
            prior_logits=jnp.where(absorbing[:, None], 0.0, logits).astype(out.prior_logits.dtype),
        )
        return out, AbsorbingEmbedding(inner, absorbing)

    return SearchModel(root=root, recurrent=recurrent)


def learned_root(network):
    """The search's root from a learned network: initial inference on the stacked observations
    (shared by the deterministic and the stochastic model)."""

    def root(params, rng, stacked_obs):
        del rng
        out = network.initial_inference(params, stacked_obs)
        return mctx.RootFnOutput(prior_logits=out.policy_logits, value=out.value, embedding=out.hidden_state)

    return root


def step_discount(discount: float, out):
    """[B] each edge's discount: the signed constant, or, where the model predicts whether the turn
    passes (`turn_logit`: games whose turns may repeat), gamma (1 - 2p) with p its probability: +gamma
    when the mover moves again, -gamma when the turn passes (docs/stochastic.md, "Turns that repeat")."""
    turn_logit = getattr(out, "turn_logit", None)  # a NetworkOutput field; hand-made models may lack it
    if turn_logit is None:
        return jnp.full_like(out.value, discount)
    return (abs(discount) * (1.0 - 2.0 * jax.nn.sigmoid(turn_logit))).astype(out.value.dtype)


def make_learned_model(network, discount: float) -> SearchModel:
    """MuZero's model without the dummy-action rule: root = initial inference, recurrent = recurrent inference.

    `network` follows `moozi.core.network.Network`; `params` passed to the
    search is its Flax variables dict, and the network's value/reward scalars
    are already decoded to environment scale. `discount` is the signed
    per-edge discount (`search_discount`).
    """

    def recurrent(params, rng, action, hidden_state):
        del rng
        out = network.recurrent_inference(params, hidden_state, action)
        return (
            mctx.RecurrentFnOutput(
                reward=out.reward,
                discount=step_discount(discount, out),
                prior_logits=out.policy_logits,
                value=out.value,
            ),
            out.hidden_state,
        )

    return SearchModel(root=learned_root(network), recurrent=recurrent)


def make_muzero_model(network, discount: float) -> SearchModel:
    """MuZero's search model: the learned model with an absorbing dummy action."""
    return with_absorbing_dummy(make_learned_model(network, discount))


# --------------------------------------------------------------------------- search


class SearchStats(NamedTuple):
    """Per-search numbers for logging."""

    max_depth: Array  # [B] int32: depth of the deepest node (root = 0)
    visit_entropy: Array  # [B] float32: entropy (nats) of the root visit distribution
    chosen_q: Array  # [B] float32: Q(root, acted action)
    raw_root_value: Array  # [B] float32: the model's value of the root before search


class RootChildren(NamedTuple):
    """The root's children after a search, for people to look at (`moozi report`'s search picture)."""

    prior: Array  # [B, A] float32: the prediction network's policy at the root
    visit_share: Array  # [B, A] float32: each child's share of the root's visits
    q: Array  # [B, A] float32: each child's Q from the player to move (mctx's completed value where unvisited)


class PlannerOutput(NamedTuple):
    """What one batched search returns (thesis 5.2.5)."""

    action: Array  # [B] int32: a_t
    root_value: Array  # [B] float32: v*_t, from the player to move
    action_probs: Array  # [B, A] float32: p*_t, mctx's `action_weights`
    stats: SearchStats
    root: RootChildren


def legal_to_invalid(legal_actions: Array) -> Array:
    """mctx's `invalid_actions` [B, A] from a legal mask [B, A].

    A row with no legal action at all breaks the env contract, but would make
    the search's softmax and argmax meaningless; such rows treat the dummy as
    their only legal action, which is what the contract gives on is_last steps.
    """
    legal = jnp.asarray(legal_actions, bool)  # [B, A]
    none_legal = ~jnp.any(legal, axis=-1)  # [B]
    legal = legal.at[:, DUMMY_ACTION].set(legal[:, DUMMY_ACTION] | none_legal)
    return ~legal


def run_search(
    config: PlannerConfig,
    model: SearchModel,
    params: Params,
    rng: Array,
    root_input: Any,
    legal_actions: Array,
) -> mctx.PolicyOutput:
    """Runs the configured mctx policy from `root_input`; illegal root actions are masked.

    Returns mctx's `PolicyOutput` with the whole search tree (tests and
    debugging inspect it; `plan` summarizes it).
    """
    root_rng, search_rng = jax.random.split(rng)
    root = model.root(params, root_rng, root_input)
    invalid = legal_to_invalid(legal_actions)  # [B, A]
    if config.search_policy is SearchPolicy.MUZERO:
        output = mctx.muzero_policy(
            params,
            search_rng,
            root,
            model.recurrent,
            num_simulations=config.num_simulations,
            invalid_actions=invalid,
            # mctx asserts these are Python floats.
            dirichlet_fraction=float(config.dirichlet_fraction),
            dirichlet_alpha=float(config.dirichlet_alpha),
            pb_c_init=float(config.pb_c_init),
            pb_c_base=float(config.pb_c_base),
            temperature=float(config.temperature),
        )
        return with_policy_target(config, output, root.prior_logits, invalid)
    if config.search_policy is SearchPolicy.GUMBEL_MUZERO:
        return mctx.gumbel_muzero_policy(
            params,
            search_rng,
            root,
            model.recurrent,
            num_simulations=config.num_simulations,
            invalid_actions=invalid,
            max_num_considered_actions=config.max_num_considered_actions,
            gumbel_scale=float(config.gumbel_scale),
            qtransform=functools.partial(mctx.qtransform_completed_by_mix_value, epsilon=float(config.min_value_range)),
        )
    raise MooziError(f"unknown search policy {config.search_policy!r}")


def with_policy_target(config: PlannerConfig, output: mctx.PolicyOutput, prior_logits: Array, invalid: Array) -> mctx.PolicyOutput:
    """A PUCT search's output with the policy target `config.policy_target` asks for as its
    `action_weights`: the visits as mctx gives them, or softmax(prior_logits + σ(completed Q)) at the
    root, σ and the completion as in Gumbel MuZero (`prior_logits` [B, A]: the root's, before noise)."""
    if config.policy_target == "visits":
        return output
    tree = output.search_tree
    qtransform = functools.partial(mctx.qtransform_completed_by_mix_value, epsilon=float(config.min_value_range))
    completed = jax.vmap(qtransform, in_axes=[0, None])(tree, tree.ROOT_INDEX)  # [B, A]
    logits = prior_logits - jnp.max(prior_logits, axis=-1, keepdims=True)
    logits = jnp.where(invalid, jnp.finfo(logits.dtype).min, logits + completed)
    return output.replace(action_weights=jax.nn.softmax(logits, axis=-1))


def tree_max_depth(tree: mctx.Tree) -> Array:
    """Depth [B] of the deepest node, by pointer jumping over `parents` (log2(N) gathers, no node loop)."""
    parents = tree.parents  # [B, N], -1 at the root and at unused nodes
    self_index = jnp.broadcast_to(jnp.arange(parents.shape[-1]), parents.shape)
    # Nodes without a parent point at themselves at distance 0, so jumping past them adds nothing.
    anc = jnp.where(parents >= 0, parents, self_index)  # [B, N]
    depth = (parents >= 0).astype(jnp.int32)  # [B, N] distance from each node to `anc`
    for _ in range(max(1, (parents.shape[-1] - 1).bit_length())):
        depth = depth + jnp.take_along_axis(depth, anc, axis=-1)
        anc = jnp.take_along_axis(anc, anc, axis=-1)
    return jnp.max(depth, axis=-1)


def summarize(config: PlannerConfig, policy_output: mctx.PolicyOutput) -> PlannerOutput:
    """Turns mctx's output into (a_t, v*_t, p*_t, stats)."""
    tree = policy_output.search_tree
    summary = tree.summary()
    action_probs = policy_output.action_weights  # [B, A]
    action = policy_output.action
    if config.search_policy is SearchPolicy.MUZERO and config.temperature == 0.0:
        # mctx divides the logits by a tiny number and samples, which breaks visit-count
        # ties at random; evaluation wants a reproducible argmax (first maximum). A greedy agent
        # plays its policy target's best move: the most visited one, or the completed-Q policy's
        # (see `policy_target`).
        action = jnp.argmax(action_probs, axis=-1)
    action = action.astype(jnp.int32)
    visit_probs = summary.visit_probs  # [B, A]
    visit_entropy = jnp.sum(jax.scipy.special.entr(visit_probs), axis=-1)
    chosen_q = jnp.take_along_axis(summary.qvalues, action[:, None], axis=-1)[:, 0]
    stats = SearchStats(
        max_depth=tree_max_depth(tree),
        visit_entropy=visit_entropy,
        chosen_q=chosen_q,
        raw_root_value=tree.raw_values[:, tree.ROOT_INDEX],
    )
    root = RootChildren(prior=jax.nn.softmax(tree.children_prior_logits[:, tree.ROOT_INDEX], axis=-1),
                        visit_share=visit_probs, q=summary.qvalues)
    return PlannerOutput(action=action, root_value=summary.value, action_probs=action_probs, stats=stats, root=root)


def plan(
    config: PlannerConfig,
    model: SearchModel,
    params: Params,
    rng: Array,
    root_input: Any,
    legal_actions: Array,
) -> PlannerOutput:
    """One batched search: P(root input) -> (a_t [B], v*_t [B], p*_t [B, A], stats). Pure; jit the caller."""
    return summarize(config, run_search(config, model, params, rng, root_input, legal_actions))


def make_planner(config: PlannerConfig, model: SearchModel) -> Callable[[Params, Array, Any, Array], PlannerOutput]:
    """`plan` with the config and model bound: `planner(params, rng, root_input, legal_actions [B, A])`."""

    def planner(params, rng, root_input, legal_actions):
        return plan(config, model, params, rng, root_input, legal_actions)

    return planner


def greedy_planner_config(config: PlannerConfig) -> PlannerConfig:
    """The testing worker's and evaluation's search: no root noise, argmax action.

    Gumbel MuZero's root noise is its Gumbel sample, so gumbel_scale goes to 0 too
    (otherwise the "greedy" agent samples its moves)."""
    return dataclasses.replace(config, dirichlet_fraction=0.0, temperature=0.0, gumbel_scale=0.0)


def play_planner_config(config: PlannerConfig, simulations: int | None = None) -> PlannerConfig:
    """The search of a trained agent at play time: greedy, with `simulations` simulations, else
    the config's `play_simulations`, else its training `num_simulations`."""
    count = next(n for n in (simulations, config.play_simulations, config.num_simulations) if n is not None)
    return dataclasses.replace(greedy_planner_config(config), num_simulations=count)


def fast_planner_config(config: PlannerConfig) -> PlannerConfig | None:
    """The fast search of playout cap randomisation (`full_search_share` < 1), or None where it is off."""
    if config.full_search_share >= 1.0:
        return None
    return dataclasses.replace(config, num_simulations=min(config.fast_simulations, config.num_simulations),
                               full_search_share=1.0)


def reanalyze_planner_config(config: PlannerConfig) -> PlannerConfig:
    """Reanalyze re-searches with the same search, without root Dirichlet noise (thesis 5.2.11)."""
    return dataclasses.replace(config, dirichlet_fraction=0.0)
