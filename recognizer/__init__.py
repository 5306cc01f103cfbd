"""A streaming recognizer as one artifact: its typed spec (``evaluation.systems.SystemSpec``), the files
it needs, one MLflow model version, and the one builder (``systems.build``) that the evaluate stage, ``whisperline
evaluate models:/…``, the pyfunc model and the Ray Serve app all use."""
