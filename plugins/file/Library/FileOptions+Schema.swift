import HammockCore
import HammockJSON

extension FileOptions {
    /// What `hammock schema` tells editors about a `file` source's options: the keys `known` names, each as
    /// `init` reads it (a test holds the two lists equal).
    static let schema: JSONValue = JSONSchema.object(
        "A file source: reads a file, and by default reads it again whenever it changes.",
        properties: [
            "path": JSONSchema.string(
                "The file to read: absolute, ~/… (from $HOME), or relative to the directory hammock runs in. It need not exist yet: until it does the source has an error.",
                minLength: 1),
            "parse": JSONSchema.word(
                ParseFormat.allCases.map(\.rawValue),
                "How the bytes become content: json, jsonl (JSON Lines: one value per line, as an array), yaml, text (one string) or lines (a list of strings). Without it, by the extension: .json, .jsonl/.ndjson, .yaml/.yml, else text."),
            "watch": JSONSchema.boolean(
                "Read the file again when it changes, renames and editors' atomic saves included (the default, true)."),
            "maxBytes": JSONSchema.size(
                "The largest file to read, in bytes or as a size such as 64KiB or 10MiB (the default); a larger one is an error with code tooLarge."),
            "debounce": JSONSchema.duration(
                "How long a burst of changes must settle before the file is read again, such as 50ms (the default) or 1s."),
        ],
        required: ["path"])
}
