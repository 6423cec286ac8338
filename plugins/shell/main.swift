// Placeholder until the shell plugin lands in this folder.
import HammockPluginKit
