"""A streaming recognizer as one artifact: its typed spec (``recognizer.spec.RecognizerSpec``; the served one is
``configs/recognizer.yaml``), the files it needs, one MLflow model version, and the one builder
(``recognizer.build.build``) that the evaluate stage, ``whisperline evaluate models:/…``, the pyfunc model and the
server all use."""
