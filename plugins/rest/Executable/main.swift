// hammock-plugin-rest: the `rest` kind; its logic is in the HammockRESTPlugin library, next door.
import HammockPluginKit
import HammockRESTPlugin

await Plugin.run(
    kinds: RESTPlugin.kinds, version: RESTPlugin.version, templates: RESTPlugin.templates,
    optionsSchema: RESTPlugin.optionsSchema, onShutdown: RESTPlugin.shutdown,
    makeSource: RESTPlugin.makeSource)
