// Placeholder until the file plugin lands in this folder.
import HammockPluginKit
