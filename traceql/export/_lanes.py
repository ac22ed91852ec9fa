"""Lanes: keep every exported track a properly nested set of slices.

Viewers draw one track as a stack of nested slices; two slices that overlap without nesting (findings over the
same steps, host events from a lossy dump) are drawn wrongly by Chrome's viewer and rejected as unmatched
begin/end by Perfetto's importer. Slices arrive per track in (start, longer first) order; each goes to the
first lane of its track where it nests inside the open slice or starts after it ended, else to a new lane (a
sibling track "<name> (2)", ...). The ends a placement closes are returned in order, so a writer of begin/end
events (Perfetto) emits them before the next begin at the same instant.
"""

from __future__ import annotations


class Lanes:
    __slots__ = ("stacks", "nest")

    def __init__(self, nest: bool = True) -> None:
        self.stacks: list[list[int]] = []  # per lane: ends of the open slices, innermost last
        self.nest = (
            nest  # False: a lane holds only disjoint slices (the findings track: slices never overlap)
        )

    def place(self, ts: int, end: int) -> tuple[int, list[tuple[int, int]]]:
        """(lane, [(lane, end_ns) closed, in order]) for a slice [ts, end)."""
        closed: list[tuple[int, int]] = []
        for i, st in enumerate(self.stacks):
            while st and st[-1] <= ts:  # ended before this starts: closed for good (input is in start order)
                closed.append((i, st.pop()))
            if not st or (self.nest and st[-1] >= end):
                st.append(end)
                return i, closed
        self.stacks.append([end])
        return len(self.stacks) - 1, closed

    def drain(self) -> list[tuple[int, int]]:
        """Every still-open slice's end, innermost first per lane."""
        out = [(i, e) for i, st in enumerate(self.stacks) for e in reversed(st)]
        self.stacks = []
        return out


def lane_name(track: str, lane: int) -> str:
    return track if lane == 0 else f"{track} ({lane + 1})"
