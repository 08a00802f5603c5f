"""The active timeline: one instant per (time, action), in its highest state, sorted by time.

Pure queries only; loading from ``.hoodie/`` lives in ``hudi_clusterd.table.timeline_store``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from hudi_clusterd.domain.instant import Action, Instant, State

# Actions whose completed instants make up Hudi's "commits timeline" (what the clustering trigger counts).
COMMIT_ACTIONS = frozenset({Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT, Action.CLUSTERING})
# Actions whose files are data files of the table ("write timeline").
WRITE_ACTIONS = frozenset(
    {Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT, Action.COMPACTION, Action.LOG_COMPACTION,
     Action.CLUSTERING}
)
REPLACE_ACTIONS = frozenset({Action.REPLACE_COMMIT, Action.CLUSTERING})
# A completed compaction is stored as a commit, a completed clustering as a replacecommit: each pair describes the
# same instant.
_COMPARABLE = {Action.COMPACTION: Action.COMMIT, Action.LOG_COMPACTION: Action.DELTA_COMMIT,
               Action.CLUSTERING: Action.REPLACE_COMMIT}
# Completed compactions keep their own name here; a completed clustering is a replacecommit, as Hudi has it.
_KEEPS_NAME_WHEN_COMPLETED = frozenset({Action.COMPACTION, Action.LOG_COMPACTION})


def _comparable(action: Action) -> Action:
    return _COMPARABLE.get(action, action)


@dataclass(frozen=True, slots=True)
class Timeline:
    """An immutable, time-ordered view of instants (one entry per instant, highest state)."""

    instants: tuple[Instant, ...]

    @classmethod
    def from_states(cls, states: Iterable[Instant]) -> Timeline:
        """Collapse the state files (requested, inflight, completed side by side) to one instant each."""
        best: dict[tuple[str, Action], Instant] = {}
        for inst in states:
            key = (inst.time, _comparable(inst.action))
            cur = best.get(key)
            if cur is None or inst.state.rank > cur.state.rank:
                # a completed compaction's file reads as a commit; keep the more specific action name
                action = inst.action
                if cur is not None and cur.action in _KEEPS_NAME_WHEN_COMPLETED and inst.state is State.COMPLETED:
                    action = cur.action
                best[key] = Instant(inst.time, action, inst.state, inst.transition_ms, inst.completion_time)
            elif inst.state.rank == cur.state.rank and inst.action in _KEEPS_NAME_WHEN_COMPLETED:
                best[key] = Instant(cur.time, inst.action, cur.state, cur.transition_ms, cur.completion_time)
        return cls(tuple(sorted(best.values(), key=Instant.sort_key)))

    def __iter__(self) -> Iterator[Instant]:
        return iter(self.instants)

    def __len__(self) -> int:
        return len(self.instants)

    def filter(self, pred: Callable[[Instant], bool]) -> Timeline:
        return Timeline(tuple(i for i in self.instants if pred(i)))

    def completed(self) -> Timeline:
        return self.filter(lambda i: i.is_completed)

    def pending(self) -> Timeline:
        return self.filter(lambda i: i.is_pending)

    def of_actions(self, actions: Iterable[Action]) -> Timeline:
        wanted = frozenset(actions)
        return self.filter(lambda i: i.action in wanted)

    def commits(self) -> Timeline:
        """commit, deltacommit and replacecommit instants in any state."""
        return self.of_actions(COMMIT_ACTIONS)

    def writes(self) -> Timeline:
        return self.of_actions(WRITE_ACTIONS)

    def after(self, time: str | None) -> Timeline:
        """Instants strictly after ``time`` (all of them when ``time`` is None)."""
        if time is None:
            return self
        return self.filter(lambda i: i.time > time)

    def up_to(self, time: str) -> Timeline:
        return self.filter(lambda i: i.time <= time)

    def times(self) -> list[str]:
        return [i.time for i in self.instants]

    def find(self, time: str, action: Action | None = None) -> Instant | None:
        for inst in self.instants:
            if inst.time == time and (action is None or _comparable(inst.action) == _comparable(action)):
                return inst
        return None

    @property
    def first(self) -> Instant | None:
        return self.instants[0] if self.instants else None

    @property
    def last(self) -> Instant | None:
        return self.instants[-1] if self.instants else None

    def replaces(self) -> Timeline:
        """replacecommit and clustering instants in any state."""
        return self.of_actions(REPLACE_ACTIONS)

    def last_time(self) -> str | None:
        """The greatest requested or completion time on the timeline, any action and state (new instants must
        exceed it)."""
        return max((i.newest_time for i in self.instants), default=None)

    def commits_since(self, time: str | None) -> int:
        """Completed commit/deltacommit/replacecommit instants strictly after ``time``."""
        return len(self.commits().completed().after(time))


@dataclass(frozen=True, slots=True)
class CommitIndex:
    """O(1) answers to "are the files of instant T committed?" for one timeline.

    True when a write instant at T is completed, or when T is older than the earliest write instant (any
    state) of the active timeline, i.e. its instant has been archived. Files of requested, inflight or unknown
    newer instants are not committed (this is also what hudi-rs does)."""

    write_state: dict[str, bool]
    first_write_time: str | None

    @classmethod
    def of(cls, timeline: Timeline) -> CommitIndex:
        writes = timeline.writes()
        states: dict[str, bool] = {}
        for inst in writes.instants:
            states[inst.time] = states.get(inst.time, False) or inst.is_completed
        first = writes.first
        return cls(states, first.time if first else None)

    def is_committed(self, time: str) -> bool:
        state = self.write_state.get(time)
        if state is not None:
            return state
        return self.first_write_time is not None and time < self.first_write_time
