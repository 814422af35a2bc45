"""The episodic layer: turns -> event frames -> episodes.

``extraction`` reads each turn into a frame (a summary and events with six roles) and its facts,
with spaCy's parse (``embedded``) or a language model (``llm``), behind one interface; ``fusion``
fuses frames of one event into episodes across sessions, with a rule judge or a model's
(``judges``); ``tables`` turns the frames and passages tables into fusion's items and its episodes
back into a table. The pipeline's steps (``pipeline.extract``, ``pipeline.episodes``) call these.
"""
