"""Progress reporting for long calls: a callback, or a tqdm bar in notebooks."""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional, Union

#: What a progress callback receives: ``{"stage": str, "done": int, "total": int, "table": str | None}``.
ProgressEvent = dict[str, Any]
#: ``progress=`` of the long calls: a callable, ``True`` (a tqdm bar), ``False`` (nothing) or
#: ``None`` (a tqdm bar inside a Jupyter notebook when tqdm is installed, else nothing).
ProgressArg = Union[Callable[[ProgressEvent], Any], bool, None]


def _in_notebook() -> bool:
    if "ipykernel" not in sys.modules:
        return False
    try:
        from IPython import get_ipython  # type: ignore[import-not-found]
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


class TqdmProgress:
    """A progress callback drawing one tqdm bar per stage (a widget in notebooks with ipywidgets)."""

    def __init__(self, description: str, **tqdm_options: Any) -> None:
        # Imported here: tqdm is optional. A widget in notebooks that can show one, text elsewhere
        # (tqdm.auto would warn in a notebook without ipywidgets).
        from tqdm.std import tqdm

        if _in_notebook():
            try:
                import ipywidgets  # type: ignore[import-not-found]  # noqa: F401
                from tqdm.notebook import tqdm
            except ImportError:
                pass
        self._tqdm = tqdm
        self._options = tqdm_options
        self._description = description
        self._bar: Any = None
        self._stage: Optional[str] = None

    def __call__(self, event: ProgressEvent) -> None:
        stage, done, total = event["stage"], event["done"], event["total"]
        if self._bar is None or stage != self._stage:
            self.close()
            self._stage = stage
            self._bar = self._tqdm(total=total, desc=stage if stage == self._description else f"{self._description}: {stage}", **self._options)
        self._bar.total = total
        self._bar.n = done
        if event.get("table"):
            self._bar.set_postfix_str(event["table"], refresh=False)
        self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def resolve(progress: ProgressArg, description: str) -> tuple[Optional[Callable[[ProgressEvent], Any]], Callable[[], None]]:
    """The callback for the native call and what to do when the call returns."""
    if progress is None:
        progress = _in_notebook()
        if progress:
            try:
                import tqdm  # noqa: F401
            except ImportError:
                progress = False
    if progress is False:
        return None, lambda: None
    if progress is True:
        bar = TqdmProgress(description)
        return bar, bar.close
    if not callable(progress):
        raise TypeError(f"progress must be a callable, True, False or None, not {type(progress).__name__}")
    return progress, lambda: None
