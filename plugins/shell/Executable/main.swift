// hammock-plugin-shell: the `shell` kind; its logic is in the HammockShellPlugin library, next door.
import HammockPluginKit
import HammockShellPlugin

await Plugin.run(
    kinds: ShellPlugin.kinds, version: ShellPlugin.version, templates: ShellPlugin.templates,
    queuesLoads: ShellPlugin.queuesLoads, optionsSchema: ShellPlugin.optionsSchema,
    makeSource: ShellPlugin.makeSource)
