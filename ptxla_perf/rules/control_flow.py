"""Whether a host read decides the program's control flow, told from the read's own line of source code.

A read whose value only goes to a log can wait (read it every N steps, in a step closure); a read that decides
what the host does next (`if torch.isnan(loss): continue`, `if loss > limit: break`, `while err > tol:`) cannot
simply be deferred: the decision itself has to move to the device (a masked update, `where`) or be checked every
N steps. This module reads the statement around the line a read was blamed on and says which use it is:

- `skip`: the read is the condition of an `if` whose body skips the rest of the iteration (`continue`, or a
  `return` inside the step function);
- `stop`: the condition of a `while`, an `if` whose body leaves the loop (`break`, `raise`, `sys.exit()`/`exit()`),
  or an `assert`;
- `branch`: the condition of any other `if` / conditional expression (the two sides do different work).

Pure: the source file is parsed once (ast); anything that cannot be read says nothing (None).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

SKIP, STOP, BRANCH = "skip", "stop", "branch"

_trees: dict[str, ast.AST | None] = {}


@dataclass(frozen=True)
class ControlFlow:
    use: str  # skip | stop | branch
    statement: str  # the deciding statement's first line, as written ("if torch.isnan(loss): continue")


def _tree(filename: str) -> ast.AST | None:
    if filename not in _trees:
        try:
            with open(filename, encoding="utf-8") as f:
                _trees[filename] = ast.parse(f.read(), filename)
        except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
            _trees[filename] = None
    return _trees[filename]


def _spans(node: ast.AST, line: int) -> bool:
    return node.lineno <= line <= (getattr(node, "end_lineno", None) or node.lineno)


def _exits(body: list[ast.stmt], loop_level: bool) -> str | None:
    """What a branch body does to the loop: STOP (break, raise, exit; a return out of the loop), SKIP (continue; a
    return out of a step function called by the loop), or None. Nested loops are not looked into (their break is
    their own)."""
    for stmt in body:
        for node in ast.walk(stmt) if not isinstance(stmt, (ast.For, ast.While, ast.AsyncFor)) else [stmt]:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            if isinstance(node, (ast.Break, ast.Raise)):
                return STOP
            if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)) and \
                    (getattr(node.func, "id", None) or getattr(node.func, "attr", None)) in ("exit", "_exit", "quit"):
                return STOP
            if isinstance(node, ast.Continue):
                return SKIP
            if isinstance(node, ast.Return):
                return STOP if loop_level else SKIP
    return None


def read_use(filename: str | None, line: int | None) -> ControlFlow | None:
    """How the value read at `filename:line` is used, if it decides control flow (see the module's docstring)."""
    if not filename or not line:
        return None
    tree = _tree(filename)
    if tree is None:
        return None
    found: list[tuple[ast.AST, int]] = []  # deciding nodes whose condition holds the line, outermost first

    def visit(node: ast.AST, loops: int) -> None:
        test = getattr(node, "test", None)
        if isinstance(node, (ast.If, ast.While, ast.Assert, ast.IfExp)) and test is not None and _spans(test, line):
            found.append((node, loops))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            loops = 0  # a return in here leaves this function, whatever loop called it
        elif isinstance(node, (ast.For, ast.While, ast.AsyncFor)):
            loops += 1
        for child in ast.iter_child_nodes(node):
            if not hasattr(child, "lineno") or _spans(child, line):
                visit(child, loops)

    visit(tree, 0)
    if not found:
        return None
    node, loops = found[-1]
    if isinstance(node, (ast.While, ast.Assert)):
        use = STOP
    elif isinstance(node, ast.IfExp):
        use = BRANCH
    else:
        use = _exits(node.body, loops > 0) or BRANCH
    return ControlFlow(use, _statement(filename, node))


def _statement(filename: str, node: ast.AST) -> str:
    """The deciding statement as written, on one line, comments left out: `if torch.isnan(loss): continue` (a
    one-statement body is shown), `while err.item() > tol:`, `assert ...`, or the conditional expression."""
    try:
        with open(filename, encoding="utf-8") as f:
            source = f.read()
    except (OSError, UnicodeDecodeError):
        return ""

    def text(n: ast.AST) -> str:
        return " ".join((ast.get_source_segment(source, n) or "").split())

    if isinstance(node, ast.IfExp):
        out = text(node)
    elif isinstance(node, ast.Assert):
        out = f"assert {text(node.test)}"
    else:
        out = f"{'while' if isinstance(node, ast.While) else 'if'} {text(node.test)}:"
        if isinstance(node, ast.If) and len(node.body) == 1 and not node.orelse and \
                not isinstance(node.body[0], (ast.If, ast.For, ast.While, ast.With, ast.Try)):
            out += f" {text(node.body[0])}"
    return out if len(out) <= 120 else out[:117] + "..."
