// hammock-plugin-rest: the `rest` kind; its logic is in the HammockRESTPlugin library, next door.
import HammockPluginKit
import HammockRESTPlugin

await Plugin.run(RESTPlugin.plugin)
