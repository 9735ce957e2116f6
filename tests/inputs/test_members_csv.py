"""CSV members files whose ids hold NUL are read on every Python: 3.10's csv module refuses NUL, so there it is
read as a stand-in character and given back (``dedup_cli.inputs.members``)."""

from __future__ import annotations

import sys
import types

import pytest

from dedup_cli.inputs import members

ROWS = 'id,group,action\r\n"a\0b",1,keep\r\n"c\nd\0",1,drop\r\n\0,2,keep\r\n'


@pytest.mark.parametrize("version", [(3, 10, 13), pytest.param((3, 11, 0), marks=pytest.mark.skipif(
    sys.version_info < (3, 11), reason="this Python's csv module refuses NUL"))])
def test_nul_in_a_csv_field_comes_back_whatever_the_python(monkeypatch: pytest.MonkeyPatch,
                                                          version: tuple[int, ...]) -> None:
    monkeypatch.setattr(members, "sys", types.SimpleNamespace(version_info=version))
    rows = list(members._csv_rows(iter(ROWS.splitlines(keepends=True))))
    assert rows == [["id", "group", "action"], ["a\0b", "1", "keep"], ["c\nd\0", "1", "drop"], ["\0", "2", "keep"]]


def test_the_stand_in_itself_is_refused_where_it_stands_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(members, "sys", types.SimpleNamespace(version_info=(3, 10, 13)))
    with pytest.raises(ValueError, match="U\\+FFFF"):
        list(members._csv_rows(iter([f"id\r\n{members.NUL_STAND_IN},1,keep\r\n"])))
