"""The recipe section of INSPO itself: the instruction population (§3, Alg. 1); the optimizer LM that writes new
instructions (§3.3) is `optimizer_section.py`. Part of the typed recipe (`sections.py`, which re-exports them); same
conventions."""

from __future__ import annotations

from dataclasses import dataclass, field

from inspo_cli.config.instruction_defaults import SEARCH_R1_INSTRUCTION
from inspo_cli.config.validation import _positive, _registered, _require, check_choices, choice_field
from inspo_cli.registry import IMPORT_PATH_HINT, PARENTS, PROPOSERS, SELECTIONS

# tau_s: weights are mean rewards in [0, 1], so below this softmax(w / tau_s) is argmax for any difference that
# matters; eq. 4's softmax is computed stably for every tau_s > 0 (selection/softmax.py), this only refuses typos.
MIN_TEMPERATURE = 1e-6
MAX_OFFLINE_STEPS = 1_000_000  # as training.steps
# verify_sequential: a look at D_B holds at least this many questions (the z statistic of fewer is too far from normal
# to stop on; instructions/sequential.py), and there are at most MAX_VERIFY_LOOKS (each is one more batched call)
MIN_LOOK_QUESTIONS = 20
MAX_VERIFY_LOOKS = 10


@dataclass
class PopulationConfig:
    """The instruction population of INSPO (§3, Alg. 1). `enabled: false` is the static-instruction baseline."""

    enabled: bool = field(
        default=False,
        metadata={
            "help": "true: INSPO's evolving instruction population; false: the static-instruction baseline (the first "
            "of `instructions`)."
        },
    )
    stage: str = choice_field(
        {
            "online": "INSPO: during RL",
            "pre-rl": "`inspo evolve` with the initial policy for offline_steps, then static GRPO with its best "
            "instruction",
            "post-rl": "static GRPO, then `inspo evolve` with the trained policy; the policy is evaluated with that "
            "best instruction",
        },
        "online",
        "When the instruction is optimised (Fig. 3's stage ablation): {choices}.",
    )
    offline_steps: int | None = field(
        default=None, metadata={"help": "The pre-rl/post-rl evolve stage's steps; default: evolve_until (T_e)."}
    )
    instructions: list[str] = field(
        default_factory=lambda: [SEARCH_R1_INSTRUCTION],
        metadata={
            "help": "The initial instructions (default: Search-R1's); the first is the static baseline's instruction."
        },
    )
    instruction_file: str | None = field(
        default=None,
        metadata={
            "help": 'Read the initial instructions from a text file (one instruction) or JSONL with a "text" field '
            "per line, instead of `instructions`."
        },
    )
    initial_rewrites: bool = field(
        default=False,
        metadata={"help": "Fill the population up to size with optimizer rewrites of the first instruction."},
    )
    size: int = field(default=7, metadata={"help": "N_P, the population's size (the paper: 7)."})
    n_parent: int = field(
        default=1,
        metadata={
            "help": "N_parent: instructions chosen as parents for each evolution (the paper: 1); pruning never goes "
            "below it."
        },
    )
    parents: str = field(
        default="top",
        metadata={
            "help": f"Which instructions parent the next generation: {PARENTS.choices()}; or {IMPORT_PATH_HINT}. "
            "pareto's categories are the benchmarks, or the world's question types, over the weight window."
        },
    )
    temperature: float = field(
        default=0.2,
        metadata={"help": "tau_s in softmax(w / tau_s), the sampling of instructions by weight (the paper: 0.2)."},
    )
    selection: str = field(
        default="softmax",
        metadata={
            "help": f"How each question group's instruction is drawn: {SELECTIONS.choices()}; or {IMPORT_PATH_HINT}."
        },
    )
    ucb_exploration: float = field(
        default=1.0,
        metadata={"help": "selection ucb: c in w + c * sqrt(ln N / n), the exploration bonus (rewards lie in [0, 1])."},
    )
    epsilon: float = field(
        default=0.1,
        metadata={"help": "selection epsilon-greedy: the chance a group draws uniformly instead of the best weight."},
    )
    instructions_per_question: int = field(
        default=1,
        metadata={
            "help": "k: the instructions one question's group_size rollouts are split over (the paper: 1, one per "
            "group). Beyond the paper, k > 1 draws k different instructions by `selection`, without replacement, and "
            "gives each a block of group_size / k rollouts in a row; each block's mean reward feeds its own "
            "instruction's weight (eq. 6 counts blocks as groups). With fewer than k instructions alive (after "
            "pruning), the blocks are the largest divisor of group_size not above that number. Needs enabled: true, "
            "k <= size and k dividing training.group_size."
        },
    )
    baseline: str = choice_field(
        {
            "question": "GRPO's: the mean (and deviation) of all group_size rollouts of the question, TRL's own",
            "instruction": "per block: a rollout is compared with the question's other rollouts under the same "
            "instruction, so an instruction's advantage over another is not credited to the policy; blocks of one "
            "rollout are refused (their advantage would always be 0)",
        },
        "question",
        "With instructions_per_question > 1, the baseline of a rollout's advantage (the same when it is 1): "
        "{choices}. The deviation is the block's, the batch's or none, as training.scale_rewards says.",
    )
    weight_window: int = field(
        default=5,
        metadata={
            "help": "n: the moving-average window of an instruction's mean group reward, its weight w (the paper: 5)."
        },
    )
    prune_every: int = field(
        default=5,
        metadata={
            "help": "K_p: prune the bottom half of the population every K_p steps, keeping ceil(N/2) and never fewer "
            "than n_parent (the paper: 5)."
        },
    )
    prune: bool = field(
        default=True,
        metadata={
            "help": 'false: no periodic pruning (Fig. 3\'s "constant population" ablation, with evolve_until 0).'
        },
    )
    evolve_every: int = field(default=15, metadata={"help": "K_e: evolve every K_e steps (the paper: 15)."})
    evolve_until: int = field(
        default=150, metadata={"help": "T_e: evolve only at steps before T_e (the paper: 150); 0 disables evolution."}
    )
    proposer: str = field(
        default="reflection",
        metadata={
            "help": f"How the optimizer is asked for new instructions: {PROPOSERS.choices()}; or {IMPORT_PATH_HINT}. "
            "One that combines k parents needs n_parent >= k."
        },
    )
    candidates_per_call: int = field(
        default=6,
        metadata={"help": 'Candidates the optimizer writes per call (App. C: "6 new candidates per evolution").'},
    )
    failures_per_call: int = field(
        default=4,
        metadata={"help": "The parent's failed rollouts shown to the optimizer for reflection (the paper: 4)."},
    )
    verify_size: int = field(
        default=200, metadata={"help": "|D_B|: replay-buffer questions each candidate is verified on (the paper: 200)."}
    )
    verify_rollouts: int = field(
        default=1,
        metadata={
            "help": "Rollouts of the policy per D_B question, for the parent and each candidate (App. C's 6 x 200 "
            "rollouts: one)."
        },
    )
    verify: bool = field(
        default=True,
        metadata={"help": 'false: candidates join unverified, in proposal order (Fig. 3\'s "prune + expand").'},
    )
    accept: str = choice_field(
        {
            "beat_parent": "those not significantly worse than their parent, question by question on the same D_B "
            "(§1: low performers are rejected), best first: the mean per-question difference (candidate - parent) "
            "is at least -accept_margin standard errors; instructions/verification.py",
            "top_n": "the best accept_top_n whatever their score, Alg. 1 line 21 read literally",
        },
        "beat_parent",
        "Which verified candidates join (not the paper's numbers: it gives none; see docs/faithfulness.md): {choices}.",
    )
    accept_margin: float = field(
        default=1.645,
        metadata={
            "help": "In standard errors of the paired difference: 1.645 turns away ~5% of candidates exactly as good "
            "as their parent (so App. C's one round of 6 mostly holds), 0 about half of them (bench/README.md, "
            '"Verification").'
        },
    )
    accept_top_n: int = field(default=6, metadata={"help": "At most this many of one verified batch join."})
    verify_sequential: bool = field(
        default=False,
        metadata={
            "help": "Beyond the paper (false: it scores every candidate on all of D_B). true: D_B is scored in "
            "verify_looks chunks, one batched call each, and a candidate stops being rolled out once it is "
            "clearly above or below beat_parent's line (instructions/sequential.py: a group-sequential test that "
            "turns away a copy of its parent as often as the fixed rule and admits no more worse candidates, "
            "within 0.3 points); the parent is rolled out on every chunk a candidate still needs. Needs accept: "
            "beat_parent and verify: true (top_n ranks every candidate on all of D_B, so nothing can stop early)."
        },
    )
    verify_looks: int = field(
        default=4,
        metadata={
            "help": f"verify_sequential: the looks at D_B (verify_size / verify_looks questions each, at least "
            f"{MIN_LOOK_QUESTIONS}; 2 to {MAX_VERIFY_LOOKS}); a D_B drawn smaller gets fewer looks."
        },
    )
    leak_check: str = choice_field(  # instructions/leakage.py; YAML 1.1 reads a bare off as false, a bare on is refused
        {
            "refuse": "a candidate holding a golden answer of a question its prompt showed, or 8 words of a known "
            "question, is recorded and not admitted; D_B leaves out the questions the prompt showed; a prompt "
            "showing an evaluation question, whole, stops the run",
            "flag": "as refuse, but such a candidate is admitted as usual",
            "off": "the paper's loop: nothing checked, D_B as the paper draws it",
        },
        "off",
        "Guards against the optimizer's view leaking into what is judged, beyond the paper (which has none; "
        "instructions/leakage.py, docs/faithfulness.md): {choices}.",
        yaml_bool={True: "on", False: "off"},
    )
    max_verify_rounds: int = field(
        default=5, metadata={"help": 'App. C: "a maximum of 5 rounds of verification retrials".'}
    )
    max_instruction_chars: int = field(
        default=12000,
        metadata={"help": "Longer candidates are dropped (and recorded): ~3k tokens of a 4,096-token prompt."},
    )
    replay_capacity: int = field(
        default=4096,
        metadata={"help": "Ours: the newest rollouts kept for reflection and D_B (the paper gives no size)."},
    )

    def __post_init__(self) -> None:
        _require(
            self.leak_check != "on",
            "leak_check",
            "on (or true) does not say what to do with a leaking "
            "candidate: set refuse (not admitted), flag (admitted and marked) or off",
        )
        check_choices(self)
        _require(
            bool(self.instructions) or self.instruction_file is not None,
            "instructions",
            "must list at least one instruction, or set instruction_file",
        )
        for i, text in enumerate(self.instructions):
            _require(bool(text.strip()), "instructions", f"entry {i} is empty; remove it or write the instruction")
        for name, example in (
            ("size", "7"),
            ("n_parent", "1"),
            ("temperature", "0.2"),
            ("weight_window", "5"),
            ("prune_every", "5"),
            ("evolve_every", "15"),
            ("candidates_per_call", "6"),
            ("failures_per_call", "4"),
            ("verify_size", "200"),
            ("verify_rollouts", "1"),
            ("accept_top_n", "6"),
            ("max_verify_rounds", "5"),
            ("max_instruction_chars", "12000"),
            ("replay_capacity", "4096"),
        ):
            _positive(getattr(self, name), name, example)
        _require(
            self.temperature >= MIN_TEMPERATURE,
            "temperature",
            f"must be at least {MIN_TEMPERATURE:g} (got "
            f"{self.temperature!r}): weights are mean rewards in [0, 1], so a smaller tau_s only draws the best "
            "instruction, as 1e-6 does; the paper uses 0.2",
        )
        _require(
            self.verify_size <= self.replay_capacity,
            "verify_size",
            f"is {self.verify_size}, more than replay_capacity ({self.replay_capacity}): D_B is drawn from the "
            "replay buffer's distinct questions, so it could never hold that many; lower verify_size or raise "
            "replay_capacity",
        )
        _require(
            self.evolve_until >= 0, "evolve_until", f"must be >= 0 (got {self.evolve_until}); 0 disables evolution"
        )
        _require(self.n_parent <= self.size, "n_parent", f"must be <= size ({self.size}); got {self.n_parent}")
        _require(
            len(self.instructions) <= self.size,
            "instructions",
            f"has {len(self.instructions)} entries but population.size is {self.size}; raise size or drop some",
        )
        _registered(self.proposer, PROPOSERS, "proposer")
        _registered(self.selection, SELECTIONS, "selection")
        _registered(self.parents, PARENTS, "parents")
        min_parents = PROPOSERS.resolve(self.proposer).min_parents
        _require(
            self.n_parent >= min_parents,
            "proposer",
            f"{self.proposer} combines {min_parents} parents, but population.n_parent is {self.n_parent}; set "
            f"n_parent to {min_parents} or more",
        )
        _require(self.ucb_exploration >= 0, "ucb_exploration", f"must be >= 0 (got {self.ucb_exploration}); e.g. 1.0")
        _require(0 <= self.epsilon <= 1, "epsilon", f"must be a probability in [0, 1] (got {self.epsilon}); e.g. 0.1")
        _require(
            self.accept_margin >= 0,
            "accept_margin",
            f"must be >= 0 standard errors (got {self.accept_margin}); "
            "0 admits candidates scoring at least their parent, 1.645 those not significantly worse",
        )
        self._check_sequential()
        self._check_instructions_per_question()
        if self.offline_steps is not None:
            _positive(self.offline_steps, "offline_steps", "150")
            _require(
                self.offline_steps <= MAX_OFFLINE_STEPS,
                "offline_steps",
                f"must be at most {MAX_OFFLINE_STEPS:,} (got {self.offline_steps:,}); the paper evolves for 150 steps",
            )
        _require(
            self.stage == "online" or self.enabled,
            "stage",
            f"{self.stage} optimises the instruction population, so it needs population.enabled: true",
        )
        _require(
            self.stage == "online" or self.evolve_steps > 0,
            "stage",
            f"{self.stage} evolves for population.offline_steps (default: evolve_until), which is 0; set "
            "population.offline_steps",
        )
        for i, text in enumerate(self.instructions):
            _require(
                len(text.strip()) <= self.max_instruction_chars,
                "instructions",
                f"entry {i} has {len(text.strip())} characters, over max_instruction_chars "
                f"({self.max_instruction_chars}); shorten it or raise population.max_instruction_chars",
            )

    def _check_instructions_per_question(self) -> None:
        k = self.instructions_per_question
        _positive(k, "instructions_per_question", "1 (the paper's: one instruction per question group)")
        _require(
            k <= self.size,
            "instructions_per_question",
            f"is {k}, more than population.size ({self.size}): a question's instructions are all different; "
            f"lower instructions_per_question or raise size",
        )
        _require(
            k == 1 or self.enabled,
            "instructions_per_question",
            f"is {k}, but population.enabled is false and a static instruction is only one; set "
            "instructions_per_question: 1 or population.enabled: true",
        )

    def _check_sequential(self) -> None:
        _require(
            2 <= self.verify_looks <= MAX_VERIFY_LOOKS,
            "verify_looks",
            f"must be in [2, {MAX_VERIFY_LOOKS}] (got {self.verify_looks}); e.g. 4",
        )
        if not self.verify_sequential:
            return
        stops = "stops verifying a candidate once it is clearly above or below accept: beat_parent's line"
        _require(
            self.verify,
            "verify_sequential",
            f"{stops}, but population.verify is false (nothing is verified); set verify_sequential: false",
        )
        _require(
            self.accept == "beat_parent",
            "verify_sequential",
            f"{stops}, but population.accept is {self.accept}, which ranks every candidate on all of D_B; set "
            "accept: beat_parent or verify_sequential: false",
        )
        most = self.verify_size // MIN_LOOK_QUESTIONS
        fixes = ([f"lower verify_looks to {most}"] if most >= 2 else []) + [
            f"raise verify_size to {self.verify_looks * MIN_LOOK_QUESTIONS}"
        ]
        _require(
            self.verify_looks <= most,
            "verify_looks",
            f"is {self.verify_looks} with verify_size {self.verify_size}, so a look would hold fewer than the "
            f"{MIN_LOOK_QUESTIONS} questions it needs; {' or '.join(fixes)}",
        )

    @property
    def evolve_steps(self) -> int:
        """Steps of the offline evolve stage of pre-rl / post-rl."""
        return self.offline_steps if self.offline_steps is not None else self.evolve_until
