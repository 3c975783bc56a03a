"""Build hook for the optional compiled codec; everything else is in pyproject.toml.

``optional=True``: on a machine without a C compiler (or Python headers) the build of
``kraft_jbod._accel._ccodec`` is skipped with a warning and the package installs and
runs on its pure-Python codec (``kraft_jbod.codec_backend()`` then says ``python``).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "kraft_jbod._accel._ccodec",
            ["kraft_jbod/_accel/_ccodec.c"],
            optional=True,
            extra_compile_args=["-O2", "-Wall", "-Wno-unused-parameter"],
        )
    ]
)
