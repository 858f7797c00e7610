"""The errors of the Hub publisher; each message names the problem and the fix, for the person publishing."""


class HubError(Exception):
    """An error whose message is meant for the user of upload.py / `sharedbert upload`: it names the problem and the
    fix."""


class ModelFolderError(HubError):
    """The model folder cannot be published as it is."""


class VerificationError(HubError):
    """The staged folder does not load, or does not reproduce the source model, without the sharedbert package."""


class UploadError(HubError):
    """Talking to the Hub failed."""


class StagingFolderError(HubError, ValueError):
    """The folder to stage into may not be written (it is the model folder, or holds files of the user's); a
    ValueError too, as every command's refused output folder is (`sharedbert.atomic.OutputFolderError`)."""
