"""Amazon Mechanical Turk adapter (boto3 ``mturk`` client), free of Django.

Safety rules:

* **Sandbox by default.**  The production endpoint is used only when
  ``UNPOOLED_MTURK_PRODUCTION=1`` is set explicitly (and ``UNPOOLED_MTURK_SANDBOX`` is not
  forced on).
* **Credentials only from the environment** (boto3's default chain: ``AWS_ACCESS_KEY_ID`` /
  ``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN`` or ``AWS_PROFILE``); never arguments.
* **Nothing is posted or paid twice.**  Every create, extend and bonus call carries a
  ``UniqueRequestToken`` derived from the caller's stable id; a retry after a service fault
  reuses it; Amazon's answer to a repeated token (:meth:`MTurkBackend._duplicate`, nothing else) adopts the
  existing HIT (found in the message, else by ``RequesterAnnotation``), and counts an extension or bonus as done.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, Iterable, Iterator, Mapping
from xml.sax.saxutils import escape

SANDBOX_ENDPOINT = "https://mturk-requester-sandbox.us-east-1.amazonaws.com"
PRODUCTION_ENDPOINT = "https://mturk-requester.us-east-1.amazonaws.com"
EXTERNAL_QUESTION_NS = "http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2006-07-14/ExternalQuestion.xsd"
RETRYABLE = {"ServiceFault", "ThrottlingException", "Throttling", "ServiceUnavailable", "InternalFailure"}
_HIT_ID = re.compile(r"\b([A-Z0-9]{30})\b")


class MTurkError(Exception):
    """A call Mechanical Turk refused; ``operation`` and ``code`` say which and why, ``turk_code`` is the error's
    ``TurkErrorCode`` (botocore's model of RequestError and ServiceFault) when Amazon gave one."""

    def __init__(self, operation: str, code: str, message: str, turk_code: str = "") -> None:
        super().__init__(f"mturk {operation}: {code}: {message}")
        self.operation, self.code, self.message, self.turk_code = operation, code, message, turk_code


#: Amazon's answer to a CreateHIT repeated with the UniqueRequestToken of a HIT it created (botocore's model)
HIT_ALREADY_EXISTS = "AWS.MechanicalTurk.HitAlreadyExists"


_CODE = re.compile(r"^[A-Za-z][A-Za-z0-9.]{0,63}$")


def trouble(exc: BaseException, tries: int = 1) -> str:
    """What a person reads when a call to Mechanical Turk failed: a fixed sentence by the kind of failure and
    Amazon's error code, never the exception's text (Amazon's message may carry account ids, addresses, request
    ids; the caller logs it).  ``tries``: how many times the call was made."""
    from botocore.exceptions import (ConnectionError as BotoConnectionError, HTTPClientError, NoCredentialsError,
                                     PartialCredentialsError)

    if isinstance(exc, MTurkError):
        code = exc.code if _CODE.match(exc.code or "") else "an error"
        if exc.code in RETRYABLE:
            return (f"Mechanical Turk is busy or unavailable (it answered {code}"
                    f"{f' to {tries} tries' if tries > 1 else ''}); the next sync tries again")
        return f"Mechanical Turk refused the call (it answered {code}); the server log has its message"
    if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
        return "no AWS credentials were found: set them in the environment of the server's processes"
    if isinstance(exc, (BotoConnectionError, HTTPClientError)):
        return "Mechanical Turk could not be reached; the next sync tries again"
    return "the call to Mechanical Turk failed unexpectedly; the server log has the details"


def _flag(environ: Mapping[str, str], name: str) -> bool | None:
    v = environ.get(name)
    if v is None or v == "":
        return None
    return v.strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class MTurkConfig:
    sandbox: bool = True
    region: str = "us-east-1"
    rewards: Mapping[str, str] = field(default_factory=lambda: {"verify": "0.05", "entities": "2.60",
                                                                "relations": "2.25", "clusters": "1.20"})
    assignment_seconds: int = 1800
    lifetime_seconds: int = 7 * 24 * 3600
    auto_approval_seconds: int = 3 * 24 * 3600
    keywords: str = "relation extraction, text, annotation"
    min_approval_rate: int = 95
    max_retries: int = 4

    @property
    def endpoint(self) -> str:
        return SANDBOX_ENDPOINT if self.sandbox else PRODUCTION_ENDPOINT

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "MTurkConfig":
        env = os.environ if environ is None else environ
        production = _flag(env, "UNPOOLED_MTURK_PRODUCTION") is True and _flag(env, "UNPOOLED_MTURK_SANDBOX") is not True
        kw = {}
        for kind in ("verify", "entities", "relations", "clusters"):
            v = env.get(f"UNPOOLED_MTURK_REWARD_{kind.upper()}")
            if v:
                kw[kind] = v
        rewards = {**cls().rewards, **kw}
        return cls(sandbox=not production, rewards=rewards)

    def client(self):
        """A boto3 client; credentials come from the environment only."""
        import boto3

        return boto3.session.Session().client("mturk", region_name=self.region, endpoint_url=self.endpoint)

    def qualifications(self) -> list[dict]:
        return [{"QualificationTypeId": "000000000000000000L0",  # PercentAssignmentsApproved
                 "Comparator": "GreaterThanOrEqualTo", "IntegerValues": [self.min_approval_rate],
                 "ActionsGuarded": "Accept"}]


def request_token(*parts: object) -> str:
    """A stable UniqueRequestToken (≤ 64 characters) from the caller's ids."""
    return "unpooled-" + hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:48]


_make_token = request_token


def dollars(cents: int) -> str:
    """A reward in cents as Mechanical Turk's ``Reward`` string: ``120`` → ``"1.20"``."""
    cents = int(cents)
    if cents < 0:
        raise ValueError(f"reward: {cents} cents")
    return f"{cents // 100}.{cents % 100:02d}"


def external_question(url: str, frame_height: int = 0) -> str:
    return (f'<ExternalQuestion xmlns="{EXTERNAL_QUESTION_NS}"><ExternalURL>{escape(url)}</ExternalURL>'
            f"<FrameHeight>{int(frame_height)}</FrameHeight></ExternalQuestion>")


def parse_answer_xml(xml: str) -> dict[str, str]:
    """QuestionFormAnswers XML → {QuestionIdentifier: FreeText}."""
    if not xml:
        return {}
    root = ET.fromstring(xml)
    out = {}
    for ans in root.iter():
        if ans.tag.endswith("Answer"):
            qid = next((c.text for c in ans if c.tag.endswith("QuestionIdentifier")), None)
            text = next((c.text for c in ans if c.tag.endswith("FreeText")), None)
            if qid is not None:
                out[qid] = text or ""
    return out


class MTurkBackend:
    def __init__(self, client, config: MTurkConfig | None = None, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.client = client
        self.config = config or MTurkConfig()
        self.sleep = sleep

    @classmethod
    def from_env(cls) -> MTurkBackend:
        """The adapter configured from the environment (:meth:`MTurkConfig.from_env`): sandbox unless
        ``UNPOOLED_MTURK_PRODUCTION=1``."""
        config = MTurkConfig.from_env()
        return cls(config.client(), config)

    # ------------------------------------------------------------------ plumbing
    def _call(self, operation: str, **params):
        from botocore.exceptions import ClientError

        delay = 1.0
        for attempt in range(self.config.max_retries + 1):
            try:
                return getattr(self.client, operation)(**params)
            except ClientError as exc:
                err = exc.response.get("Error", {})
                code, msg = err.get("Code", "Unknown"), err.get("Message", str(exc))
                if code in RETRYABLE and attempt < self.config.max_retries:
                    self.sleep(delay)
                    delay *= 2
                    continue
                raise MTurkError(operation, code, msg, str(exc.response.get("TurkErrorCode") or "")) from None
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _duplicate(exc: MTurkError, token: str) -> bool:
        """Whether Amazon refused the call because one with the same UniqueRequestToken ``token`` was performed
        already, as botocore's model documents it: a RequestError with TurkErrorCode
        AWS.MechanicalTurk.HitAlreadyExists (CreateHIT), or one whose message names the request's token (the other
        calls: 'The idempotency token "…" has already been processed.').  Any other refusal is not done."""
        return exc.code == "RequestError" and (exc.turk_code.lower() == HIT_ALREADY_EXISTS.lower()
                                               or (len(token) >= 8 and token in exc.message))

    # ------------------------------------------------------------------ HITs
    def create_hit(self, item_token: str, question_url: str, *, task_type: str, max_assignments: int, title: str,
                   description: str, request_token: str, reward: str | None = None) -> dict:
        """Post a HIT for one item (``RequesterAnnotation`` = ``item_token``); returns the HIT.

        A retry with the same ``request_token`` never posts a second HIT.
        """
        try:
            return self._call(
                "create_hit", MaxAssignments=max_assignments, Title=title, Description=description,
                Keywords=self.config.keywords, Reward=reward or self.config.rewards[task_type],
                AssignmentDurationInSeconds=self.config.assignment_seconds,
                LifetimeInSeconds=self.config.lifetime_seconds,
                AutoApprovalDelayInSeconds=self.config.auto_approval_seconds,
                Question=external_question(question_url), RequesterAnnotation=item_token,
                UniqueRequestToken=request_token, QualificationRequirements=self.config.qualifications())["HIT"]
        except MTurkError as exc:
            if not self._duplicate(exc, request_token):
                raise
            found = _HIT_ID.search(exc.message)
            if found:
                return self._call("get_hit", HITId=found.group(1))["HIT"]
            for hit in self.list_hits():
                if hit.get("RequesterAnnotation") == item_token:
                    return hit
            raise

    def extend_hit(self, hit_id: str, *, extra_assignments: int = 0, extra_seconds: int = 0,
                   request_token: str | None = None, now: datetime | None = None) -> None:
        if extra_assignments:
            token = request_token or _make_token(hit_id, "extend", extra_assignments)
            try:
                self._call("create_additional_assignments_for_hit", HITId=hit_id,
                           NumberOfAdditionalAssignments=extra_assignments, UniqueRequestToken=token)
            except MTurkError as exc:
                if not self._duplicate(exc, token):
                    raise
        if extra_seconds:
            now = now or datetime.now(timezone.utc)
            hit = self._call("get_hit", HITId=hit_id)["HIT"]
            base = max(hit["Expiration"], now)
            self._call("update_expiration_for_hit", HITId=hit_id,
                       ExpireAt=datetime.fromtimestamp(base.timestamp() + extra_seconds, timezone.utc))

    def expire_hit(self, hit_id: str) -> None:
        """Stop a HIT taking new workers now (a date in the past expires it at once)."""
        self._call("update_expiration_for_hit", HITId=hit_id, ExpireAt=datetime(2015, 1, 1, tzinfo=timezone.utc))

    def list_hits(self) -> Iterator[dict]:
        token = None
        while True:
            page = self._call("list_hits", MaxResults=100, **({"NextToken": token} if token else {}))
            yield from page.get("HITs", [])
            token = page.get("NextToken")
            if not token:
                return

    def list_assignments(self, hit_id: str, statuses: Iterable[str] = ("Submitted", "Approved", "Rejected")) -> Iterator[dict]:
        token = None
        while True:
            page = self._call("list_assignments_for_hit", HITId=hit_id, MaxResults=100,
                              AssignmentStatuses=list(statuses), **({"NextToken": token} if token else {}))
            for a in page.get("Assignments", []):
                yield {**a, "answers": parse_answer_xml(a.get("Answer", ""))}
            token = page.get("NextToken")
            if not token:
                return

    # ------------------------------------------------------------------ money
    def approve(self, assignment_id: str, feedback: str | None = None) -> bool:
        """Approve; an assignment already approved counts as done. Returns True if this call approved it.

        A refusal is taken for "already approved" only when Amazon's GetAssignment says the assignment's status is
        Approved (its messages are not a contract: "cannot be approved", said of a rejected one, is no approval);
        any other refusal is raised."""
        try:
            self._call("approve_assignment", AssignmentId=assignment_id,
                       **({"RequesterFeedback": feedback} if feedback else {}))
            return True
        except MTurkError as exc:
            if exc.code == "RequestError" and self._assignment_status(assignment_id) == "Approved":
                return False
            raise

    def _assignment_status(self, assignment_id: str) -> str | None:
        """The assignment's status as Amazon has it (None: Amazon would not say)."""
        try:
            return self._call("get_assignment", AssignmentId=assignment_id)["Assignment"].get("AssignmentStatus")
        except (MTurkError, KeyError):
            return None

    def reject(self, assignment_id: str, feedback: str) -> None:
        if not feedback:
            raise ValueError("feedback: a rejection must tell the worker why")
        self._call("reject_assignment", AssignmentId=assignment_id, RequesterFeedback=feedback)

    def bonus(self, worker_id: str, assignment_id: str, amount: str, reason: str, request_token: str) -> bool:
        """Pay a bonus once: a duplicate token counts as already paid. Returns True if this call paid."""
        try:
            self._call("send_bonus", WorkerId=worker_id, AssignmentId=assignment_id, BonusAmount=amount,
                       Reason=reason, UniqueRequestToken=request_token)
            return True
        except MTurkError as exc:
            if self._duplicate(exc, request_token):
                return False
            raise

    def balance(self) -> str:
        return self._call("get_account_balance")["AvailableBalance"]


@dataclass(frozen=True)
class LocalHit:
    """What the local database believes about one item's HIT."""

    item_token: str
    hit_id: str | None
    request_token: str
    expected_assignments: int


@dataclass
class ReconcileReport:
    adopted: dict[str, str] = field(default_factory=dict)      # item_token -> HITId the local state had lost
    orphans: list[str] = field(default_factory=list)           # remote HITs of ours the local state does not know
    expired_orphans: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)           # local HIT ids the remote does not have
    new_assignments: list[dict] = field(default_factory=list)  # submitted assignments not seen before

    def to_dict(self) -> dict:
        return {"adopted": self.adopted, "orphans": self.orphans, "expired_orphans": self.expired_orphans,
                "missing": self.missing, "new_assignments": [a["AssignmentId"] for a in self.new_assignments]}


def reconcile(backend: MTurkBackend, local: Iterable[LocalHit], *, known_assignments: Iterable[str] = (),
              expire_orphans: bool = False, prefix: str = "unpooled:", foreign: Iterable[str] = ()) -> ReconcileReport:
    """Repair the local view after a crash by comparing it with what Mechanical Turk holds.  ``foreign``: the
    annotations of the HITs of ours that belong elsewhere (another corpus's): never orphans, never expired."""
    local = list(local)
    foreign = set(foreign)
    by_token = {h.item_token: h for h in local}
    local_ids = {h.hit_id for h in local if h.hit_id}
    known = set(known_assignments)
    report = ReconcileReport()
    remote_ids = set()
    for hit in backend.list_hits():
        ann = hit.get("RequesterAnnotation") or ""
        hid = hit["HITId"]
        remote_ids.add(hid)
        mine = by_token.get(ann)
        if mine is None:
            if ann.startswith(prefix) and ann not in foreign:
                report.orphans.append(hid)
                if expire_orphans:
                    backend.expire_hit(hid)
                    report.expired_orphans.append(hid)
            continue
        if mine.hit_id is None:
            report.adopted[ann] = hid
        for a in backend.list_assignments(hid, statuses=("Submitted",)):
            if a["AssignmentId"] not in known:
                report.new_assignments.append({**a, "item_token": ann})
    report.missing = sorted(local_ids - remote_ids)
    return report
