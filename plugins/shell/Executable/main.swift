// hammock-plugin-shell: the `shell` kind; its logic is in the HammockShellPlugin library, next door.
import HammockPluginKit
import HammockShellPlugin

await Plugin.run(ShellPlugin.plugin)
