"""inline-core-sdk: write Inline Core nodes that run in their own environment and process.

    from inline_core_sdk import Call, Node, Outputs, Param, Port
"""

from inline_core_sdk.call import Call, Cancelled
from inline_core_sdk.media import ImageRef, MediaFile, RawImage
from inline_core_sdk.nodes import ComfyClass, Node, Outputs, Param, Port
from inline_core_sdk.version import PROTOCOL_VERSION, sdk_version

__all__ = [
    "PROTOCOL_VERSION",
    "Call",
    "Cancelled",
    "ComfyClass",
    "ImageRef",
    "MediaFile",
    "Node",
    "Outputs",
    "Param",
    "Port",
    "RawImage",
    "sdk_version",
]
