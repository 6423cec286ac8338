/// Scalar resolution following the YAML 1.2 core schema.
///
/// The 1.2 core schema is used instead of 1.1 on purpose: under 1.1 a country
/// code `no` or a flag value `off` silently turns into a boolean, which is a
/// classic source of configuration bugs.

enum YAMLCoreTag {
    static let prefix = "tag:yaml.org,2002:"
    static let str = prefix + "str"
    static let null = prefix + "null"
    static let bool = prefix + "bool"
    static let int = prefix + "int"
    static let float = prefix + "float"
    static let merge = prefix + "merge"

    /// `!!int` rather than the long form, because that is what users write.
    static func shortName(_ tag: String) -> String {
        tag.hasPrefix(prefix) ? "!!" + tag.dropFirst(prefix.count) : tag
    }
}

extension YAMLScalar {
    /// YAML 1.2 core schema resolution (NOT YAML 1.1: `yes`, `no`, `on`, `off` stay strings).
    /// Only plain scalars without a tag resolve to non-strings; quoted/literal/folded are always strings;
    /// an explicit !!str tag forces string, !!int/!!float/!!bool/!!null force that type.
    ///
    /// The loader rejects documents where a forcing tag does not fit the text, so
    /// for parsed scalars this never has to guess. For a hand-built scalar with
    /// such a mismatch the text is returned as a string.
    public var resolved: YAMLResolvedScalar {
        checkedResolution ?? .string(text)
    }

    /// nil when an explicit core tag demands a type the text cannot have.
    var checkedResolution: YAMLResolvedScalar? {
        guard let tag else {
            return style == .plain ? Self.resolvePlain(text) : .string(text)
        }
        switch tag {
        case YAMLCoreTag.null:
            return Self.isNull(text) ? .null : nil
        case YAMLCoreTag.bool:
            return Self.resolveBool(text).map(YAMLResolvedScalar.bool)
        case YAMLCoreTag.int:
            if case .int(let value)? = Self.resolveInt(text) { return .int(value) }
            return nil
        case YAMLCoreTag.float:
            switch Self.resolveInt(text) ?? Self.resolveFloat(text) {
            case .int(let value)?: return .float(Double(value))
            case .float(let value)?: return .float(value)
            default: return nil
            }
        default:
            // !!str, the non-specific "!" and application tags all keep the text.
            return .string(text)
        }
    }

    static func resolvePlain(_ text: String) -> YAMLResolvedScalar {
        if isNull(text) { return .null }
        if let value = resolveBool(text) { return .bool(value) }
        if let number = resolveInt(text) ?? resolveFloat(text) { return number }
        return .string(text)
    }

    static func isNull(_ text: String) -> Bool {
        switch text {
        case "", "~", "null", "Null", "NULL": return true
        default: return false
        }
    }

    static func resolveBool(_ text: String) -> Bool? {
        switch text {
        case "true", "True", "TRUE": return true
        case "false", "False", "FALSE": return false
        default: return nil
        }
    }

    /// `[-+]?[0-9]+`, `0o[0-7]+` or `0x[0-9a-fA-F]+`. Values that do not fit
    /// in Int become `.float` rather than failing, so huge literals stay usable.
    static func resolveInt(_ text: String) -> YAMLResolvedScalar? {
        let bytes = Array(text.utf8)
        if bytes.count > 2, bytes[0] == UInt8(ascii: "0") {
            let radix: Int
            switch bytes[1] {
            case UInt8(ascii: "x"): radix = 16
            case UInt8(ascii: "o"): radix = 8
            default: radix = 0
            }
            if radix != 0 {
                return radixValue(bytes[2...], radix: radix)
            }
        }
        var digits = bytes[...]
        if let first = digits.first, first == UInt8(ascii: "-") || first == UInt8(ascii: "+") {
            digits = digits.dropFirst()
        }
        guard !digits.isEmpty, digits.allSatisfy(isDecimalDigit) else { return nil }
        if let value = Int(text) { return .int(value) }
        return Double(text).map(YAMLResolvedScalar.float)
    }

    private static func radixValue(_ digits: ArraySlice<UInt8>, radix: Int) -> YAMLResolvedScalar? {
        var exact: Int? = 0
        var approximate = 0.0
        for byte in digits {
            guard let digit = digitValue(byte), digit < radix else { return nil }
            approximate = approximate * Double(radix) + Double(digit)
            if let current = exact {
                let (shifted, overflow1) = current.multipliedReportingOverflow(by: radix)
                let (sum, overflow2) = shifted.addingReportingOverflow(digit)
                exact = overflow1 || overflow2 ? nil : sum
            }
        }
        if let exact { return .int(exact) }
        return .float(approximate)
    }

    /// `[-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?`,
    /// `[-+]? \.(inf|Inf|INF)` and `\.(nan|NaN|NAN)`.
    static func resolveFloat(_ text: String) -> YAMLResolvedScalar? {
        switch text {
        case ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF": return .float(.infinity)
        case "-.inf", "-.Inf", "-.INF": return .float(-.infinity)
        case ".nan", ".NaN", ".NAN": return .float(.nan)
        default: break
        }
        guard matchesFloatGrammar(Array(text.utf8)) else { return nil }
        // The grammar check above is stricter than Double's parser (no hex floats,
        // no "inf" spellings), so Double only ever sees plain decimal text.
        return Double(text).map(YAMLResolvedScalar.float)
    }

    private static func matchesFloatGrammar(_ bytes: [UInt8]) -> Bool {
        var index = 0
        func skipDigits() -> Int {
            let start = index
            while index < bytes.count, isDecimalDigit(bytes[index]) { index += 1 }
            return index - start
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "-") || bytes[index] == UInt8(ascii: "+") {
            index += 1
        }
        let integerDigits = skipDigits()
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            let fractionDigits = skipDigits()
            if integerDigits == 0 && fractionDigits == 0 { return false }
        } else if integerDigits == 0 {
            return false
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "-") || bytes[index] == UInt8(ascii: "+") {
                index += 1
            }
            if skipDigits() == 0 { return false }
        }
        return index == bytes.count
    }

    private static func isDecimalDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    private static func digitValue(_ byte: UInt8) -> Int? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return Int(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return Int(byte - UInt8(ascii: "a")) + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return Int(byte - UInt8(ascii: "A")) + 10
        default: return nil
        }
    }
}
