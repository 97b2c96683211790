"""Voice replies: a conversation's answers also spoken, as a voice bubble or an audio file (`/voice on|off`)."""
