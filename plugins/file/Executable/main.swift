// hammock-plugin-file: the `file` kind; its logic is in the HammockFilePlugin library, next door.
import HammockFilePlugin
import HammockPluginKit

await Plugin.run(FilePlugin.plugin)
