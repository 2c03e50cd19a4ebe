"""Events of a user's own, named on the command line as events=[custom_events:<Cls>]."""

from purerl.runs.events import Event


class StopAtUpdateTwo(Event):
    """Marks every row it sees and stops the run once it reaches update 2."""

    def handle(self, run, chunk):
        for row in chunk.rows:
            row["custom/seen"] = 1
        if run.update >= 2:
            run.request_stop(self.name)


class NeedsArguments(Event):
    def __init__(self, threshold):
        self.threshold = threshold


class NotAnEvent:
    pass
