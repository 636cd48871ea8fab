"""What hosts get of each shipped module: the same code, line for line, without comments and
docstrings."""

from __future__ import annotations

import ast
import io
import tokenize

from workbench.remote.bundle import PACKAGE_ROOT, closure, current, shipped_source


def _without_docstrings(tree: ast.AST) -> str:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            body[0] = ast.Expr(ast.Constant(""))
    for node in ast.walk(tree):  # where a node ends moves when its last line was a docstring
        for attr in ("end_lineno", "end_col_offset"):
            if attr in node.__dict__:
                delattr(node, attr)
    return ast.dump(tree, include_attributes=True)


def test_every_shipped_module_keeps_its_code_and_its_lines():
    shipped = dict(current().files)
    for name, path in closure().items():
        text = path.read_text()
        got = shipped[path.relative_to(PACKAGE_ROOT.parent).as_posix()].decode()
        assert got.count("\n") == text.count("\n"), name
        # the same statements at the same lines and columns; docstrings empty
        same = _without_docstrings(ast.parse(got)) == _without_docstrings(ast.parse(text))
        assert same, name
        assert not [t for t in tokenize.generate_tokens(io.StringIO(got).readline) if t.type == tokenize.COMMENT]
        compile(got, name, "exec")


TRICKY = '''"""Module doc, with "quotes" and a # that is no comment."""

from __future__ import annotations  # a comment after code

X = "a # in a string stays"   # trailing comment
Y = f"{X!r} # in an f-string"  # é, a multi-byte character before the comment


class K:
    """Class doc
    over lines."""

    def f(self, a: int = 1) -> str:  # ünïcode: columns are bytes
        \'\'\'Method doc.\'\'\'
        def inner():
            "one-line doc"
            return "#" + \\
                "x"  # continued line
        return inner()  # done


async def g():
    """doc"""; return 2
'''


def test_comments_and_docstrings_go_and_every_string_stays():
    got = shipped_source(TRICKY)
    assert got.count("\n") == TRICKY.count("\n")
    assert "Module doc" not in got and "Class doc" not in got and "Method doc" not in got
    assert "one-line doc" not in got and "comment" not in got and "ünïcode" not in got
    for kept in ('"a # in a string stays"', 'f"{X!r} # in an f-string"', '"#" + \\', "return 2"):
        assert kept in got
    ns: dict = {}
    exec(compile(got, "tricky", "exec"), ns)
    assert ns["K"]().f() == "#x" and ns["X"] == "a # in a string stays" and ns["K"].__doc__ == ""
    assert ns["Y"] == "'a # in a string stays' # in an f-string"
