"""Progress while a hearsay command runs: a bar in a terminal or a notebook, nothing otherwise.

The command's rank 0 prints lines such as
    epoch   1.50/3  iter     150/300  loss 0.4121  lr 0.05 ...
(every --progress seconds); the bar follows their iteration count. tqdm is used when it is
installed (tqdm.auto picks the notebook widget), else a one-line text bar.
"""

import sys

import re

_LINE = re.compile(r"^epoch\s+([0-9.]+)/(\d+)\s+iter\s+(\d+)/(\d+)\s+loss\s+(\S+)")


def _where():
    """'notebook', 'terminal' or None."""
    try:
        ip = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
        if ip is not None and ip and "IPKernelApp" in getattr(ip, "config", {}):
            return "notebook"
    except Exception:  # pragma: no cover - IPython internals
        pass
    try:
        if sys.stderr.isatty():
            return "terminal"
    except (AttributeError, ValueError):
        pass
    return None


def make(show):
    """A progress sink, or None: show None decides by where we are, True/False force it."""
    where = _where()
    if show is False or (show is None and where is None):
        return None
    try:
        from tqdm.auto import tqdm  # noqa: F401

        return _Tqdm()
    except ImportError:
        if where == "notebook":
            return _Notebook()
        return _Text()


class _Base:
    def line(self, text):
        m = _LINE.match(text.strip())
        if m:
            self.update(int(m.group(3)), int(m.group(4)), m.group(5))

    def close(self):
        pass


class _Text(_Base):
    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.shown = False

    def update(self, it, total, loss):
        frac = it / total if total else 0.0
        width = 30
        fill = int(round(frac * width))
        self.stream.write(
            "\r[%s%s] %3d%%  iter %d/%d  loss %s" % ("#" * fill, "." * (width - fill), 100 * frac, it, total, loss)
        )
        self.stream.flush()
        self.shown = True

    def close(self):
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()


class _Notebook(_Base):
    def __init__(self):
        from IPython.display import display

        self.handle = display("starting", display_id=True)

    def update(self, it, total, loss):
        self.handle.update("iter %d/%d (%d%%)  loss %s" % (it, total, 100 * it // max(total, 1), loss))


class _Tqdm(_Base):
    def __init__(self):
        from tqdm.auto import tqdm

        self.bar = tqdm(total=None, unit="it")

    def update(self, it, total, loss):
        if self.bar.total != total:
            self.bar.total = total
        self.bar.n = it
        self.bar.set_postfix_str("loss " + loss, refresh=False)
        self.bar.refresh()

    def close(self):
        self.bar.close()
