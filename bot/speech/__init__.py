"""Speech: voice notes heard (speech-to-text) and replies spoken (text-to-speech).

Owns decoding and measuring audio with the system's ffmpeg (`audio`), the OpenAI-compatible
speech service (`service`), hearing the voice notes a turn stores (`hearing`), speaking a
reply in the parts a lane can send (`speaking`) and transcribing stored voice notes later
(`backfill`). The engine and the command line use it; lanes reach it through the engine.
It never decides what the model sees: `transcript` renders what it stored.
"""
