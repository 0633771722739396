extension SignatureDomain {
    /// An identity binding its link handshake's Noise static key to itself, for one handshake
    /// (`natter/v1/noise-static`). The signed message is the static public key followed by the handshake hash, so a
    /// binding made for one handshake is worthless in any other.
    public static let noiseStatic = SignatureDomain("natter/v1/noise-static")
}
