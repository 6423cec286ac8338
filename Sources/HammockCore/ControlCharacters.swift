extension String {
    /// The text with C0 and C1 control characters and DEL written as `\n`, `\r`, `\t` or `\u{1B}`: how a
    /// diagnostic quotes an id or a value, so that it cannot move the cursor, recolour the terminal or
    /// overwrite the line it is on. `Redactor` matches a secret in this form too.
    public var escapingControlCharacters: String {
        guard unicodeScalars.contains(where: \.isControlCharacter) else { return self }
        var result = ""
        for scalar in unicodeScalars {
            switch scalar {
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where scalar.isControlCharacter: result += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result
    }
}

extension String {
    /// The text with each C0 and C1 control character and DEL turned into a space: how a bar's line carries
    /// content, which the bar must show and never act on. Scalar by scalar, since a control character and a
    /// combining mark after it are one `Character`.
    public var controlCharactersAsSpaces: String {
        guard unicodeScalars.contains(where: \.isControlCharacter) else { return self }
        var result = String.UnicodeScalarView()
        for scalar in unicodeScalars { result.append(scalar.isControlCharacter ? " " : scalar) }
        return String(result)
    }
}

extension Unicode.Scalar {
    /// C0 and C1 control characters and DEL.
    var isControlCharacter: Bool { value < 0x20 || (0x7F...0x9F).contains(value) }
}
