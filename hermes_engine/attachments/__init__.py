"""What the engine makes of the files people send, whichever platform brought them: the text of documents
(`documents.py`) and the words of voice notes (`voice.py`)."""
