"""The hush word at inference: the learned padding fed after the audio (frontend) and transcription with it."""
