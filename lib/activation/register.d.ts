// `node --import @paperclipai/adapter-utils-native/register`: a side-effect entry (no exports).
export {};
