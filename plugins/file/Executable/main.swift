// hammock-plugin-file: the `file` kind; its logic is in the HammockFilePlugin library, next door.
import HammockFilePlugin
import HammockPluginKit

await Plugin.run(
    kinds: FilePlugin.kinds, version: FilePlugin.version, optionsSchema: FilePlugin.optionsSchema,
    makeSource: FilePlugin.makeSource)
