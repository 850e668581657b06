"""Request and response shapes of the REST API (they make the OpenAPI schema)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import AfterValidator, ConfigDict, Field

from unpooled.service.submissions.actions import LINK_MAX, LINK_PATTERN
from unpooled.service.submissions.models import Submission
from unpooled.service.evaluations.policy import SERVICE_LEVELS

def _no_nul(v: str) -> str:
    if "\x00" in v:
        raise ValueError("contains a NUL character (U+0000)")
    return v


#: the JSON schema of a string without NUL (an ECMA regular expression)
NUL_FREE = "^[^\\u0000]*$"

#: any text a client sends (path, query, form, JSON body): no NUL character, as the schema says (the database
#: refuses NUL in text; in a URL it is refused before any view: ``config.middleware``)
Text = Annotated[str, AfterValidator(_no_nul), Field(json_schema_extra={"pattern": NUL_FREE})]

Level = Literal[SERVICE_LEVELS]  # the service's sampling levels (evaluations.policy)
Visibility = Literal[tuple(Submission.Visibility.values)]  # type: ignore[valid-type]
Stage = Literal[tuple(Submission.Status.values)]  # type: ignore[valid-type]


# ---------------------------------------------------------------------------- errors

class DiagnosticOut(Schema):
    """A located problem (the shape of ``unpooled.core.diagnostics.Diagnostic``)."""

    path: str = Field(description="the file, or where a request field was sent (query, form, body, path)")
    line: int = Field(description="1-based line; 0: the whole file or a request field")
    col: int = 0
    code: str = Field(description="stable code: UP1xx format, UP2xx consistency; a validation type for requests")
    severity: Literal["error", "warning"] = "error"
    message: str
    field: str = ""
    text: str = Field("", description="the offending input, shortened")
    help: str = ""


class ErrorOut(Schema):
    """Every error: a stable ``code``, a ``message`` that says what and where, and located diagnostics."""

    code: str
    message: str
    diagnostics: list[DiagnosticOut] = []


class PageOut(Schema):
    count: int = Field(description="items in all pages")
    limit: int
    offset: int
    next: str | None = Field(None, description="URL of the next page")
    previous: str | None = None


# ---------------------------------------------------------------------------- accounts

class QuotaOut(Schema):
    per_day: int | None
    total: int | None
    used_day: int
    used_total: int
    left_day: int | None
    left_total: int | None


class TeamOut(Schema):
    id: int
    name: str


class MeOut(Schema):
    authenticated: bool
    via: Literal["token", "session", "anonymous"]
    user: str | None
    role: str | None
    team: TeamOut | None
    quota: QuotaOut | None
    token: dict | None = Field(None, description="the token in use: name, prefix, created")


# ---------------------------------------------------------------------------- corpora

class CorpusOut(Schema):
    name: str
    title: str
    schema_name: str
    source_format: str
    n_documents: int
    n_sentences: int
    n_gold_relations: int
    created: datetime
    url: str


class CorpusDetailOut(CorpusOut):
    counts: dict[str, int] = Field(description="documents, sentences, gold relations, submissions you can see, "
                                               "published ones; labels in the pool (organisers only: it holds "
                                               "private runs' labels too)")
    levels: list[str]
    leaderboard_url: str
    documents_url: str


class CorpusPage(PageOut):
    items: list[CorpusOut]


class DocumentOut(Schema):
    id: int
    doc_id: str
    title: str
    length: int
    url: str


class DocumentDetailOut(DocumentOut):
    text: str
    source: str
    sentences: list[list[int]] = Field(description="[start, end) character offsets of each sentence")


class DocumentPage(PageOut):
    items: list[DocumentOut]


# ---------------------------------------------------------------------------- submissions

class SubmissionOut(Schema):
    id: int
    corpus: str
    team: str
    run: str
    format: str
    status: Stage = Field(description="the evaluation's lifecycle stage")
    visibility: Visibility
    description: str
    link: str = Field("", description="the method's paper or code, as the team gave it")
    file_name: str
    file_size: int
    counts: dict[str, Any]
    created: datetime
    period: int | None = Field(None, description="the evaluation period it was made in (null: outside periods)")
    reference: bool = Field(False, description="the human reference (the exhaustive annotation), not a team's run")
    url: str
    status_url: str
    scores_url: str


class SubmissionDetailOut(SubmissionOut):
    status_changed: datetime | None
    failed_stage: str
    error: str
    warnings: list[DiagnosticOut]
    labels_url: str


class SubmissionPage(PageOut):
    items: list[SubmissionOut]


#: what a run's description may hold (submissions.names.description_problem), in words: a JSON-schema pattern cannot
#: name Unicode's categories
DESCRIPTION_RULE = ("the method in a few lines: line feeds and tabs allowed; no other control, invisible or "
                    "direction-changing character (400 otherwise)")


class BodyIn(Schema):
    """A JSON request body: a field the endpoint does not take is refused (400 naming it), not ignored (a misspelt
    ``visibilty`` answered 200 and changed nothing)."""

    model_config = ConfigDict(extra="forbid")


class SubmissionPatch(BodyIn):
    visibility: Visibility | None = None
    description: Text | None = Field(None, max_length=10_000, description=DESCRIPTION_RULE)
    link: str | None = Field(None, max_length=LINK_MAX, pattern=LINK_PATTERN,
                             description="the method's paper or code: an http(s) address (printable ASCII, "
                                         "percent-encoded), or '' to remove it")


class UploadOut(Schema):
    """An upload being validated; once done, either the submission or the error with its diagnostics."""

    upload: str
    state: Literal["queued", "validating", "accepted", "rejected", "failed"]
    done: bool
    file_name: str
    corpus: str
    team: str
    url: str
    submission: int | None = None
    submission_url: str | None = None
    status_url: str | None = Field(None, description="the submission's evaluation progress")
    duplicate: bool = Field(False, description="this file was submitted before: the earlier submission")
    counts: dict[str, Any] = {}
    warnings: list[DiagnosticOut] = []
    error: ErrorOut | None = None


# ---------------------------------------------------------------------------- evaluation

class ScoreOut(Schema):
    id: int
    level: str
    estimator: str
    p: float | None = Field(description="precision; null (with its bounds) when undefined: no labelled draw weighs "
                                        "the submission")
    p_lo: float | None
    p_hi: float | None
    r: float | None = Field(description="recall; null (with its bounds) when undefined: the exhaustive sample has "
                                        "no true instance")
    r_lo: float | None
    r_hi: float | None
    f1: float | None = Field(description="F1; null (with its bounds) when precision or recall is")
    f1_lo: float | None
    f1_hi: float | None
    draws: int
    labels_new: int
    labels_reused: int
    exhaustive_documents: int
    recall_protocol: Literal["sentence", "document"] = Field(
        "sentence", description="the recall protocol recall and F1 follow: sentence (within-sentence: facts whose "
                                "two arguments share a sentence) or document (document-level: every fact between two "
                                "entity clusters of a document)")
    details: dict[str, Any] = Field(
        description="how the score was made: `ess` (effective sample size), `warnings`, `provenance` (draws new and "
                    "reused), `raw` (the estimate before it is clipped to [0, 1]: a correction for the crowd's errors "
                    "can move it out by a little), "
                    "`anytime` (anytime-valid bounds), and with crowd votes `sample` (the labelled sample's own "
                    "figures, uncorrected), `crowd_rates` and `variance` (by source); `ppi` (the prediction-powered "
                    "precision beside the score) where the run gave confidences")
    breakdown: dict[str, Any] | None = Field(None, description="the score by relation and by subject entity type "
                                                               "(its error analysis left out); null on leaderboard "
                                                               "rows and while it is being computed")
    created: datetime
    frozen: datetime | None = Field(None, description="when this score was frozen (its evaluation period closed): "
                                                      "later labels do not move it; null while it may move")


class ScoresOut(Schema):
    submission: int
    status: str
    scores: dict[str, ScoreOut] = Field(description="the newest score per level")


class ScorePage(PageOut):
    items: list[ScoreOut]


class ProgressOut(Schema):
    """The lifecycle progress (``unpooled.service.evaluations.status.progress``)."""

    submission: int
    status: str
    status_label: str
    failed_stage: str
    error: str
    steps: list[dict[str, str]]
    levels: list[dict[str, str]] = Field(description="each level of the plan: level, state (scored: published with "
                                                          "its score; provisional: a score while labels are still "
                                                          "coming in; waiting, none, todo, failed) and label")
    provisional: bool = Field(description="some level has a provisional score")
    status_changed: str | None
    instances: int = Field(description="the submission's instances, which the draws are made from")
    draws: dict[str, int] = Field(description="draws per level (with replacement: an instance may be drawn again)")
    draws_detail: list[dict[str, Any]] = Field(description="per level: level, draws, distinct (instances drawn), "
                                                           "labelled (of those)")
    plan: dict[str, Any]
    labels_needed: int = Field(description="distinct instances drawn at any level: one label each; the sum of "
                                           "label_origins' n")
    labels_received: int = Field(description="those labelled; the sum of label_origins' got")
    label_origins: list[dict[str, Any]] = Field(description="where the labels needed come from, in parts that add "
                                                            "up: part (new, reused, joined, unasked), label, n, got")
    labels_new: int
    labels_reused: int
    labels_joined: int
    over_budget: int
    more_answers: int = Field(description="verification items of relations the crowd judges weakly, asked with "
                                          "more answers each")
    more_answers_cost: str = Field(description="what those extra answers cost")
    answers_outstanding: int
    cost_cents: int
    budget_cents: int | None
    eta_seconds: int | None = Field(description="null when unknown: nobody is working on the corpus's queue")
    time_left: str = Field(description="the time left in words, or why it is unknown")
    backend: str
    backend_label: str
    exhaustive_documents: int
    exhaustive_done: int
    done: bool
    url: str
    scores_url: str


class LeaderboardRow(Schema):
    rank: int | None = Field(description="null for the human reference, which takes no rank")
    tied: bool
    rank_lo: int | None = Field(None, description="the rank interval's best rank (every rank interval holds its "
                                                  "true rank at once with 90% confidence); null for the reference")
    rank_hi: int | None = Field(None, description="the rank interval's worst rank")
    better_than: list[str] = Field([], description="the systems (team/run) this one beats with 90% confidence "
                                                   "(simultaneous over every pair)")
    reference: bool = Field(False, description="the human reference: the corpus's exhaustive annotation scored as "
                                               "a submission (precision from other annotators' verification)")
    period: int | None = Field(None, description="the evaluation period the submission was made in")
    frozen: datetime | None = Field(None, description="when its score was frozen (its period closed)")
    name: str = Field(description="team/run")
    submission: int
    team: str
    run: str
    visibility: Visibility
    url: str
    score: ScoreOut


class PeriodRef(Schema):
    corpus: str
    number: int


class PeriodOut(Schema):
    """An evaluation period of a corpus (``unpooled.service.evaluations.periods``)."""

    number: int
    title: str
    open: bool
    opened: datetime
    closed: datetime | None = Field(description="null while open; when closed, its submissions' scores are frozen")
    released: datetime | None = Field(description="when its annotated data was last released")
    follows: PeriodRef | None = Field(description="the period this one continues (possibly of another corpus)")


class PeriodList(Schema):
    corpus: str
    items: list[PeriodOut]


class PeriodIn(BodyIn):
    """A new evaluation period; the next period on a new corpus names the closed one it follows: follows_corpus and
    follows_number together, or neither."""

    model_config = ConfigDict(json_schema_extra={"dependentRequired": {"follows_corpus": ["follows_number"],
                                                                       "follows_number": ["follows_corpus"]}})

    title: Text = Field("", max_length=200)
    follows_corpus: Text = Field(None, min_length=1, max_length=100,
                                 description="with follows_number: the closed period this one continues (the next "
                                             "period, on a new corpus)")
    follows_number: int = Field(None, ge=1, description="with follows_corpus: the number of that period")


class LeaderboardOut(Schema):
    corpus: str
    level: str
    period: int | None = Field(None, description="the period shown; null: every submission (overall)")
    recall_protocol: Literal["sentence", "document", "mixed"] = Field(
        "sentence", description="the recall protocol the ranked rows' recall and F1 follow (mixed: some rows were "
                                "frozen under another; each row's score names its own)")
    rows: list[LeaderboardRow]


class PairOut(Schema):
    a: int = Field(description="submission id")
    a_name: str = Field(description="team/run")
    b: int
    b_name: str
    diff: float | None = Field(description="the metric of a minus that of b")
    se: float | None = Field(description="standard error of the difference (from the joint design's covariance)")
    lo: float | None = Field(description="the difference's interval, simultaneous over every pair of the table")
    hi: float | None
    better: Literal["a", "b"] | None = Field(description="which is better with the table's confidence; null: the "
                                                         "data cannot tell")


class PairwiseOut(Schema):
    corpus: str
    level: str
    period: int | None
    metric: Literal["p", "r", "f1"]
    confidence: float = Field(description="the simultaneous confidence of every interval of the table")
    critical: float | None = Field(description="the critical value c of the intervals diff +- c se")
    method: str | None = Field(description="max-t (Gaussian multipliers over the estimated covariance) or "
                                           "bonferroni (more pairs than the max-t's bound)")
    pairs: list[PairOut]


class EntityMetricOut(Schema):
    value: float | None = Field(description="the estimate; null when it cannot be given (see reason)")
    se: float | None
    lo: float | None = Field(description="lower end of the interval (a bound alone when value is null)")
    hi: float | None
    n: int = Field(description="the sample size behind it (mentions, draws)")
    level: float | None = Field(None, description="the interval's confidence level")
    method: str = Field("", description="the estimator: document-ratio (over the exhaustive documents) or stratified "
                                        "(argument mentions from the verification draws, the rest from the documents)")
    interval: str = Field("", description="how the interval was built: wilson, hull (Wilson's and the normal "
                                          "one), f1-region (from precision's and recall's), bounds (no estimate)")
    reason: str = Field("", description="why there is no estimate (e.g. the corpus's gold layer has no KB links)")


class EntityScoreOut(Schema):
    id: int
    created: datetime
    frozen: datetime | None = Field(None, description="when these entity scores were frozen (their evaluation period "
                                                      "closed): later labels do not move them; null: not frozen")
    level: str = Field(description="the sampling level whose verified draws gave the argument mentions' validity")
    documents: int = Field(description="exhaustively annotated documents used")
    confidence: float | None
    match: str | None = Field(description="how mentions match the exhaustive layer: overlap or exact")
    metrics: dict[str, EntityMetricOut] = Field(
        description="mention_p, mention_r, mention_f1, typing, link_p, link_r, link_f1, nil_b3_p, nil_b3_r, "
                    "nil_b3_f1")
    mentions: int | None = Field(description="the submission's distinct mentions")
    argument_mentions: int | None = Field(description="of which its relation instances use")
    argument_draws: int | None
    notes: list[str]
    crowd_accuracy: float | None = Field(description="the annotators' accuracy on mention validity, estimated "
                                                     "from their agreement")


class EntityScoresOut(Schema):
    submission: int
    status: str
    entity_score: EntityScoreOut | None = Field(description="the newest entity score (null: not computed yet)")


class EntityLeaderboardRow(Schema):
    rank: int | None = Field(description="null: the ranking metric cannot be scored for this submission")
    tied: bool
    name: str
    submission: int
    team: str
    run: str
    visibility: str
    url: str
    frozen: datetime | None = Field(None, description="when its entity scores were frozen (its period closed)")
    entity_score: EntityScoreOut


class EntityLeaderboardOut(Schema):
    corpus: str
    metric: str
    period: int | None = Field(None, description="the evaluation period shown; null: all")
    rows: list[EntityLeaderboardRow]


class LabelOut(Schema):
    id: int
    key: str
    correct: bool
    probability: float
    method: str
    n_answers: int
    guideline_version: str
    created: datetime


class LabelPage(PageOut):
    items: list[LabelOut]


class SampleItemOut(Schema):
    """A drawn instance of a submission with its current label (``None`` while unlabelled)."""

    instance: int
    line: int
    document: str
    predicate: str
    subject: str
    object: str
    key: str
    levels: list[str]
    draws: int
    label: LabelOut | None


class SamplePage(PageOut):
    submission: int
    labelled: int
    incorrect: int
    items: list[SampleItemOut]
