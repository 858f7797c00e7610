"""The export's error, and the imports of its optional runtimes, which raise it naming the extra to install."""


class ExportError(RuntimeError):
    """The export failed or does not reproduce the PyTorch model."""


def import_onnxruntime():
    """onnxruntime, or an ExportError naming the onnx extra."""
    try:
        import onnxruntime
    except ImportError as error:
        raise ExportError('ONNX export needs the onnx extra: pip install "sharedbert[onnx]" '
                          "(onnx, onnxscript, onnxruntime)") from error
    return onnxruntime


def import_openvino():
    """openvino, or an ExportError naming the openvino extra."""
    try:
        import openvino
    except ImportError as error:
        raise ExportError('OpenVINO export needs the openvino extra: pip install "sharedbert[openvino]" '
                          "(openvino, nncf)") from error
    return openvino


def import_nncf():
    """NNCF (OpenVINO's quantizer), or an ExportError naming the openvino extra."""
    try:
        import nncf
    except ImportError as error:
        raise ExportError('OpenVINO int8 needs NNCF: pip install "sharedbert[openvino]" (openvino, nncf)') from error
    return nncf
