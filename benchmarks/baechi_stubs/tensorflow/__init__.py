"""Stands in for TensorFlow: only ``tf.app.flags`` (DEFINE_* store the default in FLAGS), which Baechi's placer_lib uses at import."""

import types


class _Flags:
    """``tf.app.flags.FLAGS``: attributes read back the defaults given to ``DEFINE_*``."""

    def __init__(self):
        object.__setattr__(self, "_values", {})

    def __getattr__(self, name):
        try:
            return self._values[name]
        except KeyError as exc:
            raise AttributeError(name) from exc

    def __setattr__(self, name, value):
        self._values[name] = value


FLAGS = _Flags()


def _define(name, default, *args, **kwargs):
    FLAGS._values[name] = default


flags = types.SimpleNamespace(
    FLAGS=FLAGS,
    DEFINE_enum=_define,
    DEFINE_boolean=_define,
    DEFINE_bool=_define,
    DEFINE_float=_define,
    DEFINE_string=_define,
    DEFINE_integer=_define,
)
app = types.SimpleNamespace(flags=flags)
