"""Hush word (WhisperFlow §4.1): a learned audio segment appended to speech so that frozen Whisper stops cleanly
without 30 s of padding."""
